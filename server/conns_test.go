package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// silentWait is how long a test waits for the server to close a silent
// connection: well past the 1 s the tests configure, well short of the
// bounds that apply without it (10 s by default, grpc-go's own 120 s).
const silentWait = 8 * time.Second

// readUntilClosed reads c until the server closes it or wait passes, and
// returns the bytes read and whether the server closed it.
func readUntilClosed(c net.Conn, wait time.Duration) (int, bool) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 4096)
	n := 0
	for {
		k, err := c.Read(buf)
		n += k
		if err != nil {
			var ne net.Error
			return n, !errors.As(err, &ne) || !ne.Timeout()
		}
	}
}

// dialSilent opens a TCP connection to addr and, when tlsCfg is set,
// completes a TLS handshake on it; then it sends nothing.
func dialSilent(t *testing.T, addr string, tlsCfg *tls.Config) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if tlsCfg == nil {
		return c
	}
	tc := tls.Client(c, tlsCfg)
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	return tc
}

// expectClosed checks that each silent connection is closed by the
// server within silentWait; they are waited for together.
func expectClosed(t *testing.T, conns map[string]net.Conn) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := []string{}
	for name, c := range conns {
		wg.Go(func() {
			if _, closed := readUntilClosed(c, silentWait); !closed {
				mu.Lock()
				open = append(open, name)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(open) > 0 {
		t.Fatalf("silent connections still open after %s: %v", silentWait, open)
	}
}

// A connection that connects and says nothing is closed after the
// handshake timeout on every listener, plaintext gRPC included (grpc-go
// alone waits 120 s for its preface); a real client is unaffected.
func TestSilentConnectionClosedOnEveryListener(t *testing.T) {
	ts := startTransports(t, server.Config{HandshakeTimeout: time.Second, MetricsAddr: "127.0.0.1:0"})
	natsAddr := strings.TrimPrefix(ts.Srv.NATSURL(), "nats://")
	expectClosed(t, map[string]net.Conn{
		"grpc":    dialSilent(t, ts.Srv.Addr(), nil),
		"http":    dialSilent(t, ts.Srv.HTTPAddr(), nil),
		"metrics": dialSilent(t, ts.Srv.MetricsAddr(), nil),
		"nats":    dialSilent(t, natsAddr, nil),
	})
	if _, err := ts.C.GetSchema(t.Context()); err != nil {
		t.Fatalf("a real client after the silent ones: %v", err)
	}
}

// Over TLS the same bound covers the handshake and what follows it: a
// client that sends nothing, and one that completes the handshake and
// then sends nothing (no HTTP/2 preface, no request headers).
func TestSilentTLSConnectionClosedOnEveryListener(t *testing.T) {
	ts := startTLSServer(t, server.Config{NoSync: true, HandshakeTimeout: time.Second}, false)
	natsAddr := strings.TrimPrefix(ts.Srv.NATSURL(), "tls://")
	h2 := ts.ca.ClientConfig(t)
	h2.NextProtos, h2.ServerName = []string{"h2"}, "127.0.0.1"
	h1 := ts.ca.ClientConfig(t)
	h1.NextProtos, h1.ServerName = []string{"http/1.1"}, "127.0.0.1"
	expectClosed(t, map[string]net.Conn{
		"grpc, no handshake":                  dialSilent(t, ts.Srv.Addr(), nil),
		"grpc, handshake and no preface":      dialSilent(t, ts.Srv.Addr(), h2),
		"http, no handshake":                  dialSilent(t, ts.Srv.HTTPAddr(), nil),
		"http/1.1, handshake and no request":  dialSilent(t, ts.Srv.HTTPAddr(), h1),
		"metrics, no handshake":               dialSilent(t, ts.Srv.MetricsAddr(), nil),
		"metrics, handshake and no request":   dialSilent(t, ts.Srv.MetricsAddr(), h1),
		"nats, no handshake (after its INFO)": dialSilent(t, natsAddr, nil),
	})
	if _, err := ts.C.GetSchema(t.Context()); err != nil {
		t.Fatalf("a real client after the silent ones: %v", err)
	}
}

// A gRPC connection without streams for IdleTimeout gets GOAWAY and is
// closed (its client goes IDLE and reconnects when it next calls); one
// holding a stream stays, however quiet the stream.
func TestIdleGRPCConnectionClosed(t *testing.T) {
	ts := startServer(t, server.Config{IdleTimeout: time.Second})
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(ts.Srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	idle, busy := dial(), dial()
	if _, err := healthpb.NewHealthClient(idle).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(t.Context())
	defer wcancel()
	watch, err := healthpb.NewHealthClient(busy).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), silentWait)
	defer cancel()
	for st := idle.GetState(); st == connectivity.Ready; st = idle.GetState() {
		if !idle.WaitForStateChange(ctx, st) {
			t.Fatalf("a connection without streams is still open after %s", silentWait)
		}
	}
	// Well past the idle timeout for the connection with a stream too.
	time.Sleep(2 * time.Second)
	if st := busy.GetState(); st != connectivity.Ready {
		t.Fatalf("a connection with an open stream went %v", st)
	}
	if _, err := healthpb.NewHealthClient(busy).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a call on the connection with a stream: %v", err)
	}
	// The idle client reconnects when it calls again.
	if _, err := healthpb.NewHealthClient(idle).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a call after the idle close: %v", err)
	}
}

// At the connection cap a listener closes new connections as soon as it
// accepts them, while the connections it holds keep working: a client
// opened before inserts and queries during a flood of silent connections,
// and one opened after gets in once the silent ones are cut. The metrics
// count it, every series from the start.
func TestConnectionCap(t *testing.T) {
	const limit, flood = 20, 70
	ts := startServer(t, server.Config{
		MaxConnections:   limit,
		HandshakeTimeout: 3 * time.Second,
		HTTPAddr:         "127.0.0.1:0",
		MetricsAddr:      "127.0.0.1:0",
	})
	ts.MustApply(map[string]string{"shop.proto": shopProto}) // its connection is open from here
	metricsURL := "http://" + ts.Srv.MetricsAddr() + "/metrics"
	fams := scrape(t, metricsURL)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"protobase_connections_limit", nil, limit},
		{"protobase_connections_open", map[string]string{"listener": "grpc"}, 1},
		{"protobase_connections_open", map[string]string{"listener": "http"}, 0},
		{"protobase_connections_refused_total", map[string]string{"listener": "grpc"}, 0},
		{"protobase_connections_refused_total", map[string]string{"listener": "http"}, 0},
		{"protobase_connections_refused_total", map[string]string{"listener": "metrics"}, 0},
	} {
		if v, ok := metricValue(fams, c.name, c.labels); !ok || v != c.want {
			t.Errorf("at start-up %s%v = %v (present: %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}

	grpcConns := make([]net.Conn, flood)
	for i := range grpcConns {
		grpcConns[i] = dialSilent(t, ts.Srv.Addr(), nil)
		dialSilent(t, ts.Srv.HTTPAddr(), nil)
	}
	// The client opened before works at the cap.
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
	if n := ts.Count("shop.User"); n != 1 {
		t.Fatalf("%d users, want 1", n)
	}

	// A connection the server accepted gets its HTTP/2 SETTINGS before it
	// is cut; one refused is closed without a byte.
	var accepted, refused int
	for _, c := range grpcConns {
		n, closed := readUntilClosed(c, 15*time.Second)
		switch {
		case !closed:
			t.Fatal("a silent connection was never closed")
		case n > 0:
			accepted++
		default:
			refused++
		}
	}
	if accepted != limit-1 || refused != flood-limit+1 {
		t.Fatalf("%d silent connections accepted and %d refused, want %d and %d", accepted, refused, limit-1, flood-limit+1)
	}

	// A client opened after the flood.
	conn, err := grpc.NewClient(ts.Srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	q, err := pbgrpc.NewProtobaseClient(conn).Query(ctx, &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}}, grpc.WaitForReady(true))
	if err != nil || len(q.Records) != 1 {
		t.Fatalf("query by a client opened after the flood: %v records, %v", len(q.GetRecords()), err)
	}
	restQuery(t, "http://"+ts.Srv.HTTPAddr())

	fams = scrape(t, metricsURL)
	for _, c := range []struct {
		listener string
		refused  float64
	}{{"grpc", flood - limit + 1}, {"http", flood - limit}, {"metrics", 0}} {
		if v, _ := metricValue(fams, "protobase_connections_refused_total", map[string]string{"listener": c.listener}); v != c.refused {
			t.Errorf("refused on %s: %v, want %v", c.listener, v, c.refused)
		}
	}
	if v, _ := metricValue(fams, "protobase_connections_open", map[string]string{"listener": "grpc"}); v != 2 {
		t.Errorf("open on grpc after the flood: %v, want the 2 clients", v)
	}
}

// restQuery queries shop.User over REST, retrying while the listener
// refuses the connection, for up to 15 s.
func restQuery(t *testing.T, base string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	var last error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := hc.Post(base+"/v1/query", "application/json", strings.NewReader(`{"query": {"type": "shop.User"}}`))
		if err != nil {
			last = err
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("REST query after the flood: %s", resp.Status)
		}
		return
	}
	t.Fatalf("REST query after the flood: %v", last)
}

// The embedded NATS server holds the same cap, besides the service's own
// connection: the client past it is refused, and the clients connected
// keep being served.
func TestNATSConnectionCap(t *testing.T) {
	const limit = 5
	ts := startTransports(t, server.Config{MaxConnections: limit})
	var first *nats.Conn
	for i := range limit {
		nc, err := nats.Connect(ts.Srv.NATSURL(), nats.NoReconnect())
		if err != nil {
			t.Fatalf("client %d of %d: %v", i+1, limit, err)
		}
		t.Cleanup(nc.Close)
		if first == nil {
			first = nc
		}
	}
	// The server sends "-ERR 'maximum connections exceeded'" and closes;
	// the client reads it, or fails writing its CONNECT first.
	if nc, err := nats.Connect(ts.Srv.NATSURL(), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatalf("client %d of %d connected", limit+1, limit)
	}
	subject := natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectSchemaGet)
	if _, err := first.Request(subject, nil, 10*time.Second); err != nil {
		t.Fatalf("a request at the cap: %v", err)
	}
}
