package server_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// createKey makes a key through the admin API and returns it.
func (e *authEnv) createKey(name string, role pb.KeyRole) string {
	e.t.Helper()
	resp, err := e.ts.C.CreateKey(context.Background(), &pb.CreateKeyRequest{Name: name, Role: role})
	if err != nil {
		e.t.Fatalf("create key %s: %v", name, err)
	}
	e.keys[name] = resp.Key
	return resp.Key
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

// rogueInsertsAnswered runs the attack of a rogue that joins the
// service's queue group on the insert subject and answers with a fake OK;
// then 40 inserts are made through alice's connection. It returns how
// many the rogue answered, after checking that every insert was stored.
// aliceKey, when set, goes in each request's Authorization header.
func rogueInsertsAnswered(t *testing.T, ts *testServer, alice *nats.Conn, aliceKey string, rogue *nats.Conn) int64 {
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
	c := &natsClient{t: t, ts: ts, nc: alice, prefix: natstransport.DefaultPrefix, key: aliceKey}
	before := ts.Count("shop.User")
	for i := range 40 {
		c.mustCall(natstransport.SubjectInsert, &pb.WriteRequest{Records: []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d@x"}`, 1000+i, i))}}, new(pb.WriteResponse))
	}
	if n := ts.Count("shop.User") - before; n != 40 {
		t.Fatalf("%d of 40 inserts stored", n)
	}
	return answered.Load()
}

// TestNATSWithKeysOnlyTheServiceServes logs in to the embedded NATS server
// with real API keys, made through the admin API of a server requiring
// them.
func TestNATSWithKeysOnlyTheServiceServes(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	ts := e.ts
	aliceKey, rogueKey := e.createKey("alice", pb.KeyRole_KEY_ROLE_WRITE), e.createKey("mallory", pb.KeyRole_KEY_ROLE_READ)
	url := ts.Srv.NATSURL()

	// No key, a wrong key, a well-formed unknown key, or the service's
	// user name without its random password: refused.
	unknown, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string][]nats.Option{
		"no key":       nil,
		"wrong key":    {nats.Token("guess")},
		"unknown key":  {nats.Token(unknown)},
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
	if n := rogueInsertsAnswered(t, ts, alice, aliceKey, rogue); n != 0 {
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

	// Revoking a key through the admin API (here over gRPC) closes its
	// open NATS connections, and it cannot log in again.
	closed := make(chan struct{})
	held := connectNATS(t, url, append(natstransport.ClientOptions(aliceKey), nats.NoReconnect(),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))...)
	if err := ts.C.RevokeKey(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
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

// TestNATSLoginAndHeaderAgree checks the two NATS checks together: the
// login's role bounds the subjects a connection may publish to, and a
// request is answered only into the inbox of the key in its own
// Authorization header, so a connection gets answers only for requests
// carrying the key it logged in with. A revocation made over NATS itself
// closes the revoked key's connections too.
func TestNATSLoginAndHeaderAgree(t *testing.T) {
	e := startAuthServer(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	url := e.ts.Srv.NATSURL()
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	before := e.state()
	// A read login cannot publish a write batch or a key change, whatever
	// the header says.
	insert := &pb.WriteRequest{Records: []*anypb.Any{e.user(60)}}
	for _, c := range []struct{ endpoint, key string }{
		{natstransport.SubjectInsert, ""}, {natstransport.SubjectInsert, "reader"}, {natstransport.SubjectInsert, "admin"},
		{natstransport.SubjectKeysCreate, "admin"}, {natstransport.SubjectKeysRevoke, "admin"},
	} {
		nc := connectNATS(t, url, append(natstransport.ClientOptions(e.keys["reader"]), quiet)...)
		msg := nats.NewMsg(natstransport.Subject(natstransport.DefaultPrefix, c.endpoint))
		msg.Reply = nc.NewRespInbox()
		msg.Data = mustMarshal(t, insert)
		if k := e.key(c.key); k != "" {
			msg.Header.Set(natstransport.HeaderAuthorization, "Bearer "+k)
		}
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
		wantViolation(t, nc, "a read login publishing to "+c.endpoint+" with header key "+strconv.Quote(c.key))
	}
	nc := connectNATS(t, url, append(natstransport.ClientOptions(e.keys["reader"]), quiet)...)
	if after := e.state(); after != before {
		t.Fatalf("a refused insert changed the state:\n%s\nwant\n%s", after, before)
	}
	if st := e.natsCall(nc, "reader", natstransport.SubjectSchemaGet, &pb.GetSchemaRequest{}, &pb.GetSchemaResponse{}); st != nil {
		t.Fatalf("a read with the reader's header: %v", st)
	}
	// Another key's header (even one its holder may use), or none: its
	// answer would go into an inbox this connection cannot read, so there
	// is none; the drops are counted.
	publishGet(t, e.ts, nc, nc.NewRespInbox(), e.keys["admin"])
	publishGet(t, e.ts, nc, nc.NewRespInbox(), "")
	waitMetric(t, e.ts, e.keys["admin"], dropped, map[string]string{"reason": "outside_inbox"}, 1)
	waitMetric(t, e.ts, e.keys["admin"], dropped, map[string]string{"reason": "no_key"}, 1)

	closed := make(chan struct{})
	connectNATS(t, url, append(natstransport.ClientOptions(e.keys["writer"]), nats.NoReconnect(),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))...)
	admin := connectNATS(t, url, natstransport.ClientOptions(e.keys["admin"])...)
	if st := e.natsCall(admin, "admin", natstransport.SubjectKeysRevoke, &pb.RevokeKeyRequest{Name: "writer"}, &pb.RevokeKeyResponse{}); st != nil {
		t.Fatalf("revoke over NATS: %v", st)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection of a key revoked over NATS stayed open")
	}
}

// Each key's login may publish to the endpoints its role may call, and no
// others.
func TestNATSPublishByRole(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	subject := func(endpoints ...string) []string {
		var s []string
		for _, ep := range endpoints {
			s = append(s, natstransport.Subject(natstransport.DefaultPrefix, ep))
		}
		return s
	}
	reads := subject(natstransport.SubjectSchemaGet, natstransport.SubjectQuery, natstransport.SubjectGet, natstransport.SubjectGetRecords)
	writes := subject(natstransport.SubjectInsert, natstransport.SubjectUpdate, natstransport.SubjectUpsert, natstransport.SubjectRemove)
	schema := subject(natstransport.SubjectSchemaApply)
	keys := subject(natstransport.SubjectKeysCreate, natstransport.SubjectKeysList, natstransport.SubjectKeysRevoke)
	others := []string{"protobase.other", "protobase.schema.drop", "$SRV.PING", "elsewhere"}
	join := slices.Concat[[]string]
	for _, c := range []struct {
		key              string
		allowed, refused []string
	}{
		{"user-reader", reads, join(writes, schema, keys, others)},
		{"writer", join(reads, writes), join(schema, keys, others)},
		{"schemer", join(reads, writes, schema), join(keys, others)},
		{"admin", join(reads, writes, schema, keys), others},
	} {
		nc := connectNATS(t, e.ts.Srv.NATSURL(), append(natstransport.ClientOptions(e.key(c.key)), quiet)...)
		for _, subj := range c.allowed {
			// An empty message without a reply subject: published, and
			// dropped by the service unanswered.
			if err := nc.Publish(subj, nil); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := nc.LastError(); err != nil {
				t.Fatalf("%s publishing to %s: %v", c.key, subj, err)
			}
		}
		// The violation names the subject: each check is its own.
		for _, subj := range c.refused {
			if err := nc.Publish(subj, nil); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := nc.LastError(); err == nil || !strings.Contains(err.Error(), `Permissions Violation for Publish to "`+subj+`"`) {
				t.Fatalf("%s publishing to %s was allowed (last error %v)", c.key, subj, err)
			}
		}
	}
}

// Without authentication anyone may call, but still only the service can
// read requests or answer them.
func TestNATSWithoutKeysOnlyTheServiceServes(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	url := ts.Srv.NATSURL()
	alice := connectNATS(t, url)
	rogue := connectNATS(t, url, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if n := rogueInsertsAnswered(t, ts, alice, "", rogue); n != 0 {
		t.Fatalf("the rogue answered %d of 40 inserts", n)
	}
	for _, subj := range []string{"protobase.>", ">", "$SRV.>"} {
		if _, err := rogue.Subscribe(subj, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		wantViolation(t, rogue, "subscribing to "+subj)
	}
}
