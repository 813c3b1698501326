package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// testKeys is a KeyChecker FOR TESTS ONLY: a set of keys and their
// names, from which a key can be removed (revoked). In the server,
// Protobase's authentication (its key store) supplies the checker; this
// stands in for it so that the NATS side is tested against the real
// embedded server.
type testKeys struct {
	mu    sync.Mutex
	names map[string]string // key -> name
}

func newTestKeys(keyNames map[string]string) *testKeys {
	return &testKeys{names: keyNames}
}

func (k *testKeys) check(_ context.Context, key string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if name, ok := k.names[key]; ok {
		return name, nil
	}
	return "", errors.New("unknown key")
}

func (k *testKeys) revoke(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.names, key)
}

// connectNATS connects with opts, failing the test on error.
func connectNATS(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append(opts, nats.Timeout(5*time.Second))...)
	if err != nil {
		t.Fatalf("connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// wantViolation checks that the server refused what nc just asked (a
// subscription or a publish): its -ERR arrives before the PONG of Flush.
func wantViolation(t *testing.T, nc *nats.Conn, what string) {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatalf("%s: flush: %v", what, err)
	}
	if err := nc.LastError(); err == nil || !strings.Contains(err.Error(), "Permissions Violation") {
		t.Fatalf("%s was allowed (last error %v)", what, err)
	}
}

// rogueInsertsAnswered runs the attack: a rogue joins the
// service's queue group on the insert subject and answers with a fake OK;
// then 40 inserts are made through alice's connection. It returns how
// many the rogue answered, after checking that every insert was stored.
func rogueInsertsAnswered(t *testing.T, ts *testServer, alice, rogue *nats.Conn) int64 {
	t.Helper()
	var answered atomic.Int64
	_, err := rogue.QueueSubscribe(natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectInsert), natstransport.DefaultQueue, func(m *nats.Msg) {
		answered.Add(1)
		_ = m.Respond(nil) // an empty WriteResponse: OK
	})
	if err != nil {
		t.Fatal(err)
	}
	wantViolation(t, rogue, "joining the service's queue group")
	c := &natsClient{t: t, ts: ts, nc: alice, prefix: natstransport.DefaultPrefix}
	for i := range 40 {
		c.mustCall(natstransport.SubjectInsert, &pb.WriteRequest{Records: []*anypb.Any{ts.rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d@x"}`, 1000+i, i))}}, new(pb.WriteResponse))
	}
	if n := ts.count("shop.User"); n != 40 {
		t.Fatalf("%d of 40 inserts stored", n)
	}
	return answered.Load()
}

func TestNATSWithKeysOnlyTheServiceServes(t *testing.T) {
	const aliceKey, rogueKey = "alice-key-0123456789abcdef", "mallory-key-0123456789abcdef"
	keys := newTestKeys(map[string]string{aliceKey: "alice", rogueKey: "mallory"})
	ts := startTransports(t, server.Config{NoSync: true, KeyChecker: keys.check})
	url := ts.srv.NATSURL()

	// No key, a wrong key, or the service's user name without its random
	// password: refused.
	for name, opts := range map[string][]nats.Option{
		"no key":       nil,
		"wrong key":    {nats.Token("guess")},
		"service user": {nats.UserInfo("protobase-service", "guess")},
	} {
		if nc, err := nats.Connect(url, append(opts, nats.Timeout(5*time.Second))...); err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Errorf("%s: %v, want an authorization violation", name, err)
		}
	}
	// The key also works as a password, under any user name.
	connectNATS(t, url, nats.UserInfo("anyone", aliceKey), nats.CustomInboxPrefix(natstransport.InboxPrefix(aliceKey)))

	alice := connectNATS(t, url, natstransport.ClientOptions(aliceKey)...)
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	rogue := connectNATS(t, url, append(natstransport.ClientOptions(rogueKey), quiet)...)
	if n := rogueInsertsAnswered(t, ts, alice, rogue); n != 0 {
		t.Fatalf("the rogue answered %d of 40 inserts", n)
	}

	// The rogue cannot read requests, nor other callers' replies, nor
	// answer in another caller's place.
	for _, subj := range []string{"protobase.>", "protobase.insert", ">", "_INBOX.>", natstransport.InboxPrefix(aliceKey) + ".>"} {
		if _, err := rogue.Subscribe(subj, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		wantViolation(t, rogue, "subscribing to "+subj)
	}
	if err := rogue.Publish(natstransport.InboxPrefix(aliceKey)+".x.y", []byte("fake")); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, rogue, "publishing to another caller's inbox")
	if err := rogue.Publish("$SRV.STATS", nil); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, rogue, "asking for the service's stats")
	// A client that does not use the inbox its key allows cannot get
	// replies: its reply subscription is refused.
	stray := connectNATS(t, url, nats.Token(aliceKey), quiet)
	if _, err := stray.Request(natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectSchemaGet), nil, time.Second); err == nil {
		t.Fatal("a request with the default inbox got a reply")
	}
	wantViolation(t, stray, "subscribing to the default inbox")

	// Revoking a key closes its open connections, and it cannot log in
	// again.
	closed := make(chan struct{})
	held := connectNATS(t, url, append(natstransport.ClientOptions(aliceKey), nats.NoReconnect(),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))...)
	keys.revoke(aliceKey)
	ts.srv.NATSKeyRevoked("alice")
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked key's connection stayed open")
	}
	if held.Status() != nats.CLOSED {
		t.Fatalf("connection status %v after revocation", held.Status())
	}
	if nc, err := nats.Connect(url, natstransport.ClientOptions(aliceKey)...); err == nil {
		nc.Close()
		t.Fatal("a revoked key connected")
	}
	// Other keys' connections stay.
	if err := rogue.Flush(); err != nil {
		t.Fatalf("another key's connection after the revocation: %v", err)
	}
}

// Without authentication anyone may call, but still only the service can
// read requests or answer them.
func TestNATSWithoutKeysOnlyTheServiceServes(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	url := ts.srv.NATSURL()
	alice := connectNATS(t, url)
	rogue := connectNATS(t, url, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if n := rogueInsertsAnswered(t, ts, alice, rogue); n != 0 {
		t.Fatalf("the rogue answered %d of 40 inserts", n)
	}
	for _, subj := range []string{"protobase.>", ">", "$SRV.>"} {
		if _, err := rogue.Subscribe(subj, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		wantViolation(t, rogue, "subscribing to "+subj)
	}
}
