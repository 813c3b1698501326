package server_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// The receive budget (server/recvbudget.go, internal/recvbudget): partial
// gRPC messages are bounded per connection and over all of them, and the
// connections closed are those holding the most.

// partialBody is a gRPC message prefix declaring maxMsg-1 bytes followed
// by sent bytes of it: a message that never completes.
func partialBody(maxMsg, sent int) []byte {
	b := make([]byte, 5+sent)
	binary.BigEndian.PutUint32(b[1:5], uint32(maxMsg-1))
	return b
}

// alive reports whether the server still answers c: it pings and waits
// for the answer or for the connection's end.
func (c *h2client) alive() bool {
	c.mu.Lock()
	want := c.pings + 1
	c.mu.Unlock()
	c.wmu.Lock()
	err := c.fr.WritePing(false, [8]byte{2})
	c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for err == nil && c.pings < want && c.err == nil {
		c.cond.Wait()
	}
	return err == nil && c.err == nil
}

// served runs a well-behaved client until stop is closed: on its own
// connection it inserts a record and reads one back, again and again. It
// returns the first error and the rounds done.
func served(ts *testServer, stop <-chan struct{}) (<-chan error, *int) {
	errc := make(chan error, 1)
	rounds := new(int)
	go func() {
		defer close(errc)
		c, err := client.Dial(ts.Srv.Addr())
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := insertAndRead(ctx, ts, c, 1_000_000+i)
			cancel()
			if err != nil {
				errc <- err
				return
			}
			*rounds = i + 1
		}
	}()
	return errc, rounds
}

func insertAndRead(ctx context.Context, ts *testServer, c *client.Client, id int) error {
	w, err := c.API().Insert(ctx)
	if err != nil {
		return err
	}
	if err := w.Send(&pb.WriteRequest{Records: []*anypb.Any{ts.Rec("shop.User", `{"id": `+strconv.Itoa(id)+`, "email": "w`+strconv.Itoa(id)+`"}`)}}); err != nil {
		return err
	}
	if _, err := w.CloseAndRecv(); err != nil {
		return err
	}
	_, err = c.Query(ctx, &pb.Query{Type: "shop.User", Limit: 1}, 1, "")
	return err
}

// Many connections, each with partial messages under its share, whose sum
// is far over the server's budget: the largest holders are closed, the
// heap stays within the budget and a stated slack, and a well-behaved
// client on another connection keeps writing and reading throughout.
// Without the budget the same attack holds conns × 21 MiB (252 MiB).
func TestAdversarialReceiveBudget(t *testing.T) {
	const conns, streams, maxMsg, sent, budget = 12, 3, 8 * mib, 7 * mib, 48 * mib
	ts := startServer(t, server.Config{MaxMessageBytes: maxMsg, MaxReceiveBufferBytes: budget,
		CacheBytes: 8 * mib, NoSync: true, MetricsAddr: "127.0.0.1:0"})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	base := heapInuse()

	stop := make(chan struct{})
	errc, rounds := served(ts, stop)
	body := partialBody(maxMsg, sent)
	var attackers []*h2client
	for range conns {
		c := dialH2(t, ts.Srv.Addr())
		attackers = append(attackers, c)
		ids := make([]uint32, streams)
		for i := range ids {
			ids[i] = c.open("Insert")
		}
		for _, id := range ids {
			if err := c.trySend(id, body); err != nil {
				break // this connection was the largest holder and is closed
			}
		}
		c.alive()
	}
	// The heap once the closed connections are torn down.
	waitHeapBelow(t, base+budget+32*mib)
	closed := 0
	for _, c := range attackers {
		if !c.alive() {
			closed++
		}
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Fatalf("the well-behaved client failed during the attack: %v", err)
	}
	fams := scrape(t, "http://"+ts.Srv.MetricsAddr()+"/metrics")
	held, _ := metricValue(fams, "protobase_receive_partial_bytes", nil)
	cut, _ := metricValue(fams, "protobase_receive_connections_closed_total", map[string]string{"reason": "budget"})
	t.Logf("%d connections of %d MiB partial messages, budget %d MiB: %d closed (metric %v), %v bytes held, %d rounds of the other client",
		conns, streams*sent/mib, budget/mib, closed, cut, held, *rounds)
	// What fits: budget / (streams × sent) connections, at most.
	if want := conns - budget/(streams*sent); closed < want || int(cut) != closed {
		t.Fatalf("%d connections closed (metric %v), want at least %d", closed, cut, want)
	}
	if held > budget {
		t.Fatalf("%v bytes of partial messages held, over the %d MiB budget", held, budget/mib)
	}
	if *rounds == 0 {
		t.Fatal("the well-behaved client did nothing")
	}
	for _, c := range attackers {
		c.conn.Close()
	}
	waitHeapBelow(t, base+16*mib)
	fams = scrape(t, "http://"+ts.Srv.MetricsAddr()+"/metrics")
	if held, _ := metricValue(fams, "protobase_receive_partial_bytes", nil); held != 0 {
		t.Fatalf("%v bytes of partial messages held after every attacker left", held)
	}
}

// A connection whose partial messages exceed its share is closed;
// another, under its share, keeps its streams, and other clients are
// served.
func TestAdversarialReceiveShare(t *testing.T) {
	testReceiveShare(t, func(cfg server.Config) (*testServer, func() *h2client) {
		ts := startServer(t, cfg)
		ts.MustApply(map[string]string{"shop.proto": shopProto})
		return ts, func() *h2client { return dialH2(t, ts.Srv.Addr()) }
	})
}

// The same over TLS, where the budget reads each connection after its
// handshake.
func TestAdversarialReceiveShareTLS(t *testing.T) {
	testReceiveShare(t, func(cfg server.Config) (*testServer, func() *h2client) {
		ts := startTLSServer(t, cfg, false)
		return ts.testServer, func() *h2client {
			tc := ts.ca.ClientConfig(t)
			tc.NextProtos = []string{"h2"}
			conn, err := tls.Dial("tcp", ts.Srv.Addr(), tc)
			if err != nil {
				t.Fatal(err)
			}
			return newH2client(t, conn)
		}
	})
}

func testReceiveShare(t *testing.T, start func(server.Config) (*testServer, func() *h2client)) {
	const maxMsg, sent = 4 * mib, 3 * mib // the default share: 4 messages, 16 MiB
	ts, dial := start(server.Config{MaxMessageBytes: maxMsg, CacheBytes: 8 * mib, NoSync: true})
	body := partialBody(maxMsg, sent)
	under, over := dial(), dial()
	for range 4 { // 12 MiB
		under.send(under.open("Insert"), body)
	}
	var err error
	for i := 0; i < 6 && err == nil; i++ { // 18 MiB
		err = over.trySend(over.open("Insert"), body)
	}
	if over.alive() {
		t.Fatal("a connection holding 18 MiB of partial messages, over its 16 MiB share, is still open")
	}
	if !under.alive() {
		t.Fatal("a connection holding 12 MiB, under its share, was closed")
	}
	checkServed(t, ts, 1)
}

// A client that sends maximal messages slowly, one after another, on one
// stream, is never cut: each message's bytes are given back when it is
// complete. The budget and the share are one message each; had a
// complete message stayed counted, the second would be cut.
func TestAdversarialSlowLargeMessages(t *testing.T) {
	const maxMsg = 2 * mib
	ts := startServer(t, server.Config{MaxMessageBytes: maxMsg, MaxReceiveBufferBytes: maxMsg, MaxReceiveBytesPerConn: maxMsg, NoSync: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	c, err := client.Dial(ts.Srv.Addr(), client.WithDialOptions(grpc.WithContextDialer(slowDialer)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := c.API().Insert(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("n", maxMsg-4096)
	for i := range 4 {
		rec := ts.Rec("shop.User", `{"id": `+strconv.Itoa(i+1)+`, "email": "s`+strconv.Itoa(i)+`", "name": "`+name+`"}`)
		if err := w.Send(&pb.WriteRequest{Records: []*anypb.Any{rec}}); err != nil {
			_, err = w.CloseAndRecv()
			t.Fatalf("message %d: %v", i, err)
		}
	}
	resp, err := w.CloseAndRecv()
	if err != nil {
		t.Fatalf("slow maximal messages: %v", err)
	}
	if resp.GetRecords() != 4 {
		t.Fatalf("%d records written, want 4", resp.GetRecords())
	}
}

// slowDialer dials a connection that writes in pieces of 64 KiB, a
// millisecond apart: a slow link.
func slowDialer(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: c}, nil
}

type slowConn struct {
	net.Conn
	mu sync.Mutex // serialises writes, as the pacing is per connection
}

func (c *slowConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for len(p) > 0 {
		k := min(len(p), 64<<10)
		m, err := c.Conn.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
		if len(p) > 0 {
			time.Sleep(time.Millisecond) // pacing a slow link, not synchronisation
		}
	}
	return n, nil
}

// The receive budget and share refuse values no message of
// MaxMessageBytes could fit in, and negative ones.
func TestReceiveBudgetConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg   server.Config
		field string // "" when valid
		msg   string
	}{
		{server.Config{MaxReceiveBufferBytes: 64 * mib, MaxReceiveBytesPerConn: 64 * mib}, "", ""},
		{server.Config{MaxMessageBytes: 1000, MaxReceiveBufferBytes: 1000, MaxReceiveBytesPerConn: 1000}, "", ""},
		{server.Config{MaxReceiveBufferBytes: -1}, "MaxReceiveBufferBytes", "server: MaxReceiveBufferBytes must not be negative"},
		{server.Config{MaxReceiveBytesPerConn: -5}, "MaxReceiveBytesPerConn", "must not be negative"},
		{server.Config{MaxReceiveBufferBytes: 64*mib - 1}, "MaxReceiveBufferBytes",
			"server: MaxReceiveBufferBytes must be at least MaxMessageBytes: a message that large could never arrive"},
		{server.Config{MaxMessageBytes: 1000, MaxReceiveBytesPerConn: 999}, "MaxReceiveBytesPerConn", "at least MaxMessageBytes"},
	} {
		tc.cfg.DataDir = "d"
		err := tc.cfg.Validate()
		var ce *server.ConfigError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.cfg, err)
		case tc.field != "" && (!errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.msg)):
			t.Errorf("%+v: error %v, want field %s and %q", tc.cfg, err, tc.field, tc.msg)
		}
	}
	// The defaults: a few maximal messages per connection, 1/8 of the
	// memory over all, never less than two messages.
	if got := server.DefaultReceiveShare(64*mib, 100); got != 256*mib {
		t.Errorf("default share %d MiB, want 256", got/mib)
	}
	if got := server.DefaultReceiveShare(64*mib, 2); got != 128*mib {
		t.Errorf("default share with 2 streams per connection %d MiB, want 128", got/mib)
	}
	if got := server.DefaultReceiveBudget(16<<30, 64*mib); got != 2<<30 {
		t.Errorf("default budget for 16 GiB %d MiB, want 2048", got/mib)
	}
	if got := server.DefaultReceiveBudget(256*mib, 64*mib); got != 128*mib {
		t.Errorf("default budget for 256 MiB %d MiB, want 128 (two messages)", got/mib)
	}
	if got := server.DefaultReceiveBudget(0, 64*mib); got != 1<<30 {
		t.Errorf("default budget for an unknown memory %d MiB, want 1024", got/mib)
	}
}
