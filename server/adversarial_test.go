package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/server"
)

// The adversarial suite: clients that hold server resources without using
// them. Each test hosts the server in the test process and bounds its
// memory by the live heap (runtime.MemStats.HeapInuse after a GC), checks
// that another client is still served, and that the memory comes back
// once the hostile client leaves. MiB is the unit of every bound.

const mib = 1 << 20

// heapInuse returns the live heap after a full collection, in bytes.
func heapInuse() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// waitHeapBelow waits (bounded) until the live heap is below limit, as
// the server tears down what a departed client held.
func waitHeapBelow(t *testing.T, limit uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h := heapInuse()
		if h < limit {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("heap still %d MiB after the client left, want below %d MiB", h/mib, limit/mib)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

// checkServed fails unless another client's write succeeds within 10 s.
func checkServed(t *testing.T, ts *testServer, id int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := ts.C.API().Insert(ctx)
	if err == nil {
		rec := ts.Rec("shop.User", `{"id": `+strconv.Itoa(id)+`}`)
		if err = w.Send(&pb.WriteRequest{Records: []*anypb.Any{rec}}); err == nil {
			_, err = w.CloseAndRecv()
		}
	}
	if err != nil {
		t.Fatalf("another client's write under attack: %v", err)
	}
}

// h2client is a raw HTTP/2 client on one connection: it opens gRPC
// streams and sends what it likes on them, within the server's flow
// control, which is all a hostile client has to respect.
type h2client struct {
	t    *testing.T
	conn net.Conn
	fr   *http2.Framer

	wmu sync.Mutex // guards writes on fr and next; taken before mu, never under it

	mu      sync.Mutex // guards what follows; cond signals changes
	cond    *sync.Cond
	connWin int64
	initWin int64
	win     map[uint32]int64
	refused int
	closed  map[uint32]bool
	pings   int
	err     error
	next    uint32
}

func dialH2(t *testing.T, addr string) *h2client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return newH2client(t, conn)
}

// newH2client starts HTTP/2 on conn (plaintext, or TLS after its
// handshake).
func newH2client(t *testing.T, conn net.Conn) *h2client {
	t.Helper()
	c := &h2client{t: t, conn: conn, fr: http2.NewFramer(conn, conn), connWin: 65535, initWin: 65535,
		win: map[uint32]int64{}, closed: map[uint32]bool{}, next: 1}
	c.cond = sync.NewCond(&c.mu)
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go c.read()
	return c
}

func (c *h2client) read() {
	for {
		f, err := c.fr.ReadFrame()
		if sf, ok := f.(*http2.SettingsFrame); ok && err == nil && !sf.IsAck() {
			c.wmu.Lock() // never under mu: open takes mu under wmu
			_ = c.fr.WriteSettingsAck()
			c.wmu.Unlock()
		}
		c.mu.Lock()
		if err != nil {
			c.err = err
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					for id := range c.win {
						c.win[id] += int64(v) - c.initWin
					}
					c.initWin = int64(v)
				}
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				c.connWin += int64(f.Increment)
			} else {
				c.win[f.StreamID] += int64(f.Increment)
			}
		case *http2.RSTStreamFrame:
			c.closed[f.StreamID] = true
			if f.ErrCode == http2.ErrCodeRefusedStream {
				c.refused++
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				c.closed[f.StreamID] = true
			}
		case *http2.PingFrame:
			if f.IsAck() {
				c.pings++
			}
		}
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// open starts a gRPC call of method and returns its stream id.
func (c *h2client) open(method string) uint32 {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/protobase.v1.Protobase/" + method},
		{":authority", "localhost"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	id := c.next
	c.next += 2
	c.mu.Lock()
	c.win[id] = c.initWin
	c.mu.Unlock()
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// send sends b on stream id as the windows allow; it stops early when the
// server closes the stream.
func (c *h2client) send(id uint32, b []byte) {
	if err := c.trySend(id, b); err != nil {
		c.t.Fatal(err)
	}
}

// trySend is send, returning the connection's error (the server closed
// it) instead of failing the test.
func (c *h2client) trySend(id uint32, b []byte) error {
	for len(b) > 0 {
		c.mu.Lock()
		for c.err == nil && !c.closed[id] && (c.connWin <= 0 || c.win[id] <= 0) {
			c.cond.Wait()
		}
		if err := c.err; err != nil || c.closed[id] {
			c.mu.Unlock()
			return err
		}
		n := min(int64(len(b)), 16<<10, c.connWin, c.win[id])
		c.connWin -= n
		c.win[id] -= n
		c.mu.Unlock()
		c.wmu.Lock()
		err := c.fr.WriteData(id, false, b[:n])
		c.wmu.Unlock()
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// sync returns once the server has handled every frame sent before it:
// it answers pings in order.
func (c *h2client) sync() {
	c.mu.Lock()
	want := c.pings + 1
	c.mu.Unlock()
	c.wmu.Lock()
	err := c.fr.WritePing(false, [8]byte{1})
	c.wmu.Unlock()
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pings < want && c.err == nil {
		c.cond.Wait()
	}
	if c.err != nil {
		c.t.Fatalf("connection: %v", c.err)
	}
}

// Streams declaring large messages and sending most of each hold at most
// MaxStreamsPerConn × MaxMessageBytes on one connection; the rest are
// refused. Before the stream limit, 40 streams here held 280 MiB. The
// receive share is set to what the stream limit allows, so that the test
// sees the stream limit (the share is TestAdversarialReceiveShare's).
func TestAdversarialPartialMessages(t *testing.T) {
	const streams, maxMsg, perConn = 40, 8 * mib, 16
	ts := startServer(t, server.Config{MaxMessageBytes: maxMsg, MaxStreamsPerConn: perConn, CacheBytes: 8 * mib, NoSync: true,
		MaxReceiveBytesPerConn: perConn * maxMsg, MaxReceiveBufferBytes: 1 << 30})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	base := heapInuse()

	c := dialH2(t, ts.Srv.Addr())
	body := make([]byte, 5+7*mib) // a message declared 8 MiB - 1, 7 MiB of it sent
	binary.BigEndian.PutUint32(body[1:5], maxMsg-1)
	for range streams {
		c.send(c.open("Insert"), body)
	}
	c.sync()
	held := heapInuse() - base
	t.Logf("%d streams of 7 MiB partial messages: heap +%d MiB, %d streams refused", streams, held/mib, c.refused)
	if bound := uint64(perConn*maxMsg + 32*mib); held > bound {
		t.Fatalf("partial messages hold %d MiB, want at most %d MiB", held/mib, bound/mib)
	}
	if c.refused < streams-perConn {
		t.Fatalf("%d streams refused, want at least %d", c.refused, streams-perConn)
	}
	checkServed(t, ts, 1)
	c.conn.Close()
	waitHeapBelow(t, base+16*mib)
}

// 1,000 idle streams on one connection: the server keeps
// MaxStreamsPerConn (default 100) and refuses the rest, and it goes on
// serving others.
func TestAdversarialIdleStreams(t *testing.T) {
	ts := startServer(t, server.Config{NoSync: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	c := dialH2(t, ts.Srv.Addr())
	for range 1000 {
		c.open("Insert")
	}
	c.sync()
	c.mu.Lock()
	refused := c.refused
	c.mu.Unlock()
	if refused < 900 {
		t.Fatalf("%d of 1000 idle streams refused, want at least 900", refused)
	}
	checkServed(t, ts, 1)
}

// Search streams whose clients never read hold at most the server's
// result budget (plus a response per stream queued in gRPC), and give it
// back when cancelled. Before the budget, 40 streams held about 7 MiB each.
func TestAdversarialNonReadingSearch(t *testing.T) {
	const streams, budget = 40, 32 * mib
	ts, api := nonReadingSetup(t, budget)
	base := heapInuse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	openNonReadingSearches(ctx, t, api, streams)
	held := heapSettled(base, budget)
	t.Logf("%d non-reading Search streams: heap +%d MiB", streams, held/mib)
	if bound := uint64(budget + streams*2*mib + 16*mib); held > bound {
		t.Fatalf("non-reading Search streams hold %d MiB, want at most %d MiB", held/mib, bound/mib)
	}
	checkServed(t, ts, 1)
	cancel()
	waitHeapBelow(t, base+16*mib)
	// The budget came back: a reading client gets every result.
	if n := ts.Count("shop.User"); n != 2001 {
		t.Fatalf("after the streams were cancelled, a scan found %d users, want 2001", n)
	}
	srch, err := ts.C.API().Search(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = srch.Send(&pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User", Limit: 10}}})
	_ = srch.CloseSend()
	resp, err := srch.Recv()
	if err != nil || len(resp.GetErrors()) > 0 {
		t.Fatalf("search after the hostile streams: %v %v", err, resp.GetErrors())
	}
}

// What a non-reading connection's queued responses hold of the result
// budget stays held while the connection lives, so that another client's
// Get waits for room; it comes back when the connection closes, and the
// Get is answered.
func TestAdversarialNonReadingConnectionEnds(t *testing.T) {
	const streams, budget = 8, 8 * mib
	ts := nonReadingServer(t, budget)
	conn := nonReadingClientConn(t, ts.Srv.Addr())
	api := pbgrpc.NewProtobaseClient(conn)
	ctx := context.Background()
	openNonReadingSearches(ctx, t, api, streams)
	get := func(wait time.Duration) error {
		gctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		resp, err := ts.C.API().Get(gctx, &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{structpb.NewNumberValue(100)}})
		if err == nil && len(resp.GetRecords()) != 1 {
			return fmt.Errorf("%d records answered, want 1", len(resp.GetRecords()))
		}
		return err
	}
	// The streams take the whole budget and wait for more; the Get waits
	// behind them.
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := get(time.Second)
		if status.Code(err) == codes.DeadlineExceeded {
			break
		}
		if err != nil {
			t.Fatalf("get while the streams fill the budget: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a Get is still answered at once: the non-reading streams hold nothing of the result budget")
		}
		time.Sleep(50 * time.Millisecond) // polling until the streams have filled the budget
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := get(15 * time.Second); err != nil {
		t.Fatalf("get after the non-reading connection closed: %v (the budget did not come back)", err)
	}
}

// openNonReadingSearches opens n Search streams on api, each asking for
// every user, whose responses are never read.
func openNonReadingSearches(ctx context.Context, t *testing.T, api pbgrpc.ProtobaseClient, n int) {
	t.Helper()
	for range n {
		st, err := api.Search(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User"}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// A SearchRequest with more queries than MaxSearchQueries is refused
// before its queries are decoded.
func TestAdversarialSearchQueryCount(t *testing.T) {
	ts := startServer(t, server.Config{MaxSearchQueries: 10})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	st, err := ts.C.API().Search(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	qs := make([]*pb.Query, 11)
	for i := range qs {
		qs[i] = &pb.Query{Type: "shop.User"}
	}
	_ = st.Send(&pb.SearchRequest{Queries: qs})
	for err == nil {
		_, err = st.Recv()
	}
	wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), "more than the server's limit of 10") {
		t.Fatalf("error %v does not name the limit", err)
	}
}

// The same limit holds on the REST gateway, which decodes JSON itself and
// calls the gRPC service in process.
func TestAdversarialSearchQueryCountREST(t *testing.T) {
	ts := startTransports(t, server.Config{MaxSearchQueries: 10})
	body := `{"queries": [` + strings.TrimSuffix(strings.Repeat(`{"type": "shop.User"},`, 11), ",") + `]}` + "\n"
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+ts.Srv.HTTPAddr()+"/v1/search", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "more than the server's limit of 10") {
		t.Fatalf("HTTP %d %s: the limit is not named", resp.StatusCode, out)
	}
}

// Scan streams whose clients never read are held to the server's result
// budget, ordered (parts read ahead) or not; before it, each held two
// responses per part plus one being built. Heap figures move with the
// machine's load, so the test compares two servers in one run: the same
// hostile streams against a small budget and against one so large it
// never binds (what the server held before the budget).
func TestAdversarialNonReadingScan(t *testing.T) {
	const streams = 40
	small := nonReadingScans(t, streams, 4*mib)
	large := nonReadingScans(t, streams, 4<<30)
	t.Logf("%d non-reading Scan streams: heap +%d MiB with a 4 MiB budget, +%d MiB with one that never binds", streams, small/mib, large/mib)
	// The race detector keeps more alive (sync.Pool drops buffers at
	// random under it): its run checks the code path, not the figures.
	if !raceEnabled && float64(small) > 0.8*float64(large) {
		t.Fatalf("a 4 MiB budget held %d MiB, not clearly less than the %d MiB held without a binding budget", small/mib, large/mib)
	}
}

// nonReadingScans opens streams Scans that never read on a server with the
// given result budget and returns the heap they hold; it then checks the
// server answers, gives the memory back when they are cancelled, and
// serves a whole scan.
func nonReadingScans(t *testing.T, streams int, budget int64) uint64 {
	ts, api := nonReadingSetup(t, budget)
	base := heapInuse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range streams {
		q := &pb.Query{Type: "shop.User"}
		if i%2 == 1 {
			q.Order = &pb.Order{Descending: true}
		}
		if _, err := api.Scan(ctx, &pb.ScanRequest{Query: q, Parallelism: 8}); err != nil {
			t.Fatal(err)
		}
	}
	held := heapSettled(base, min(budget, 32*mib))
	checkServed(t, ts, 1)
	cancel()
	waitHeapBelow(t, base+16*mib)
	// The budget came back: a reading client's scan sees every record.
	if n := ts.Count("shop.User"); n != 2001 {
		t.Fatalf("after the streams were cancelled, a scan found %d users, want 2001", n)
	}
	ts.Stop()
	return held
}

// nonReadingSetup starts a server with the given result budget and 2,000
// users of 10 KiB, and returns a client connection with small windows
// that will never read: little of the results can sit in this process's
// own buffers.
func nonReadingSetup(t *testing.T, budget int64) (*testServer, pbgrpc.ProtobaseClient) {
	t.Helper()
	ts := nonReadingServer(t, budget)
	return ts, nonReadingConn(t, ts.Srv.Addr())
}

// nonReadingServer starts a server with the given result budget and 2,000
// users of 10 KiB.
func nonReadingServer(t *testing.T, budget int64) *testServer {
	t.Helper()
	ts := startServer(t, server.Config{MaxResultBufferBytes: budget, CacheBytes: 8 * mib, NoSync: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	name := strings.Repeat("n", 10<<10)
	var batch []*anypb.Any
	for i := range 2000 {
		batch = append(batch, ts.Rec("shop.User", `{"id": `+strconv.Itoa(100+i)+`, "email": "u`+strconv.Itoa(i)+`", "name": "`+name+`"}`))
		if len(batch) == 200 {
			ts.MustWrite(insert, batch)
			batch = nil
		}
	}
	return ts
}

// heapSettled polls until the server fills what it may (the heap stops
// growing between two looks, past half the budget), bounded, and returns
// the growth over base.
func heapSettled(base uint64, budget int64) uint64 {
	var held uint64
	stable := 0
	for prev, deadline := uint64(0), time.Now().Add(10*time.Second); time.Now().Before(deadline); {
		held = 0
		if h := heapInuse(); h > base { // the heap may shrink below base: nothing held
			held = h - base
		}
		if held > 0 && held <= prev+mib && held > uint64(budget)/2 {
			stable++
		} else {
			stable = 0
		}
		if stable == 5 { // half a second without growth
			break
		}
		prev = max(prev, held)
		time.Sleep(100 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	return held
}
