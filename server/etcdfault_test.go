package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// etcdFaultTimeout is the servers' etcd request timeout in these tests,
// and etcdFaultRetry how long they attempt a request again: short, so
// that a request etcd does not answer fails in a few seconds; the
// clients' deadlines are far longer, so the code seen is the server's.
const (
	etcdFaultTimeout = time.Second
	etcdFaultRetry   = 2 * time.Second
)

// startEtcdProcs starts an etcd cluster of n member processes, which the
// test can pause and kill, and kills them when t ends.
func startEtcdProcs(t *testing.T, n int) *cluster.Etcd {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd member processes")
	}
	bin, err := cluster.CachedEtcd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*cluster.StartTimeout)
	defer cancel()
	c, err := cluster.StartEtcd(ctx, bin, t.TempDir(), cluster.EtcdOptions{Members: n, Args: []string{
		"--max-txn-ops", strconv.FormatUint(uint64(etcdtest.Roomy.MaxTxnOps), 10),
		"--max-request-bytes", strconv.FormatUint(uint64(etcdtest.Roomy.MaxRequestBytes), 10)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	return c
}

// startOnEtcd starts a server on the etcd cluster at endpoints with the
// short request timeout, metrics on, and its log in the returned buffer,
// with shop.proto applied and one user stored.
func startOnEtcd(t *testing.T, endpoints ...string) (*testServer, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	ts := startServer(t, server.Config{Store: server.StoreEtcd, MetricsAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Etcd: server.EtcdConfig{Endpoints: endpoints, Prefix: "/fault/", RequestTimeout: etcdFaultTimeout,
			RetryTimeout: etcdFaultRetry}})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
	return ts, logs
}

// lockedBuffer is a log destination safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// wantFaults checks the store fault counters a scrape of ts shows, and
// that its log has line.
func (ts *testServer) wantFaults(logs *lockedBuffer, metric string, atLeast float64, line string) {
	ts.T.Helper()
	fams := scrape(ts.T, "http://"+ts.Srv.MetricsAddr()+"/metrics")
	if v, ok := metricValue(fams, metric, nil); !ok || v < atLeast {
		ts.T.Errorf("%s is %v (served: %v), want at least %v", metric, v, ok, atLeast)
	}
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		ts.T.Fatal(err)
	}
	if !strings.Contains(string(doc), "`"+metric+"`") {
		ts.T.Errorf("docs/operations.md does not list %s", metric)
	}
	if !strings.Contains(logs.String(), line) {
		ts.T.Errorf("the log lacks %q:\n%s", line, logs.String())
	}
}

// wantStatus fails the test unless err is a status of code whose message
// holds each of subs.
func wantStatus(t *testing.T, what string, err error, code codes.Code, subs ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("%s: got %v (%s), want %v", what, st.Code(), st.Message(), code)
	}
	for _, s := range subs {
		if !strings.Contains(st.Message(), s) {
			t.Errorf("%s: the message %q lacks %q", what, st.Message(), s)
		}
	}
}

// reads runs a Get, a Query and a Scan and returns their errors by name.
func (ts *testServer) reads() map[string]error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := ts.C.API()
	errs := map[string]error{}
	_, errs["get"] = api.Get(ctx, &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{structpb.NewNumberValue(1)}})
	_, errs["query"] = api.Query(ctx, &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}})
	st, err := api.Scan(ctx, &pb.ScanRequest{Query: &pb.Query{Type: "shop.User"}})
	for err == nil {
		_, err = st.Recv()
	}
	if errors.Is(err, io.EOF) {
		err = nil // the whole scan went through
	}
	errs["scan"] = err
	return errs
}

// With its etcd member paused (SIGSTOP: connections open, nothing
// answered), a server fails reads and writes with UNAVAILABLE after its
// request timeout: nothing reached etcd's state, and the writes' details
// say so. Once the member goes on, the refused insert is not there and
// writes work again. With the member killed (connection refused), the
// same.
func TestEtcdUnreachableIsUnavailable(t *testing.T) {
	c := startEtcdProcs(t, 1)
	ts, logs := startOnEtcd(t, c.Endpoints()...)

	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	for name, err := range ts.reads() {
		wantStatus(t, "read "+name+" with etcd paused", err, codes.Unavailable, "etcd did not answer within the request timeout of 1s")
	}
	_, err := ts.Write(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "email": "b@x"}`)})
	wantStatus(t, "insert with etcd paused", err, codes.Unavailable, "nothing was applied")
	if we := servertest.WriteErr(t, err, codes.Unavailable); we.GetBatch() != 0 || !strings.Contains(we.GetReason(), "nothing was applied") {
		t.Errorf("the WriteError is %v", we)
	}
	_, err = ts.Write(pb.WriteOp_WRITE_OP_UPSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 3, "email": "c@x"}`)})
	wantStatus(t, "upsert with etcd paused", err, codes.Unavailable, "nothing was applied")
	ts.wantFaults(logs, "protobase_store_unavailable_total", 5, `level=WARN msg="etcd: requests failed unapplied`)
	// Each of them was attempted again until the retry timeout.
	ts.wantFaults(logs, "protobase_store_retries_total", 5, `level=WARN msg="etcd: requests failed unapplied`)

	if err := c.Resume(0); err != nil {
		t.Fatal(err)
	}
	if n := ts.Count("shop.User"); n != 1 {
		t.Fatalf("%d users stored after the refused writes, want 1", n)
	}
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "email": "b@x"}`)})

	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	for name, err := range ts.reads() {
		wantStatus(t, "read "+name+" with etcd killed", err, codes.Unavailable)
	}
	_, err = ts.Write(pb.WriteOp_WRITE_OP_UPSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 4, "email": "d@x"}`)})
	wantStatus(t, "upsert with etcd killed", err, codes.Unavailable, "nothing was applied")
}

// A batch whose commit reached etcd but whose answer never came back
// fails DEADLINE_EXCEEDED, with a message and a WriteError that say it
// may have been applied, and it was: once the link is back, the records
// are there. The link is a TCP relay in front of a real member that stops
// passing answers once a request as large as the batch's commit has gone
// through (the batch's reads before it are small).
func TestEtcdCommitUnansweredIsOutcomeUnknown(t *testing.T) {
	link := newEtcdLink(t, etcdtest.Start(t, etcdtest.Roomy))
	ts, logs := startOnEtcd(t, link.addr())

	// About 25 KiB: more than any read, and less than the HTTP/2 window
	// the member has granted, so the whole commit goes through without an
	// answer from it.
	batch := make([]*anypb.Any, 100)
	for i := range batch {
		batch[i] = ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d@x", "name": "%s"}`, 100+i, i, strings.Repeat("n", 200)))
	}
	link.cutAnswersAfter(8 << 10)
	_, err := ts.Write(pb.WriteOp_WRITE_OP_UPSERT, batch)
	wantStatus(t, "upsert whose commit is unanswered", err, codes.DeadlineExceeded,
		"the batch was sent and etcd did not answer", "the batch may have been applied: read it back before retrying")
	if we := servertest.WriteErr(t, err, codes.DeadlineExceeded); we.GetBatch() != 0 || we.GetBatchesApplied() != 0 ||
		!strings.Contains(we.GetReason(), "may have been applied") {
		t.Errorf("the WriteError is %v", we)
	}
	ts.wantFaults(logs, "protobase_store_outcome_unknown_total", 1, `level=WARN msg="etcd: write batches sent without an answer`)

	link.heal()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := ts.C.API().Get(ctx, &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{structpb.NewNumberValue(100)}})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server does not read again after the link is back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := ts.Count("shop.User"); n != 1+len(batch) {
		t.Fatalf("%d users stored, want the first one and the %d of the unanswered batch, which etcd applied", n, len(batch))
	}
}

// etcdLink relays TCP connections to an etcd member and can stop passing
// the member's answers, as a network that drops them.
type etcdLink struct {
	t  *testing.T
	l  net.Listener
	to string

	threshold atomic.Int64 // request bytes after which answers stop; 0: off
	sent      atomic.Int64 // request bytes since cutAnswersAfter
	cut       atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
	// healed closes when heal is called: held answers are dropped then.
	healed chan struct{}
}

func newEtcdLink(t *testing.T, to string) *etcdLink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &etcdLink{t: t, l: l, to: to, healed: make(chan struct{})}
	go k.accept()
	t.Cleanup(func() { l.Close(); k.closeAll() })
	return k
}

func (k *etcdLink) addr() string { return k.l.Addr().String() }

// cutAnswersAfter stops every answer once n more request bytes have been
// passed on.
func (k *etcdLink) cutAnswersAfter(n int64) {
	k.sent.Store(0)
	k.threshold.Store(n)
}

// heal closes the connections whose answers were cut (the client dials
// again) and passes everything from then on.
func (k *etcdLink) heal() {
	k.threshold.Store(0)
	k.cut.Store(false)
	close(k.healed)
	k.closeAll()
}

func (k *etcdLink) closeAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

func (k *etcdLink) accept() {
	for {
		in, err := k.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", k.to)
		if err != nil {
			in.Close()
			continue
		}
		k.mu.Lock()
		k.conns = append(k.conns, in, out)
		k.mu.Unlock()
		go k.requests(in, out)
		go k.answers(out, in)
	}
}

// requests passes the client's bytes on; the chunk that crosses the
// threshold cuts the answers before it is passed, so that no answer to it
// can slip through.
func (k *etcdLink) requests(in, out net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if th := k.threshold.Load(); th > 0 && k.sent.Add(int64(n)) >= th {
				k.cut.Store(true)
			}
			if _, werr := out.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			out.Close()
			return
		}
	}
}

// answers passes the member's bytes back until the cut; then it holds
// them until heal, which closes the connection.
func (k *etcdLink) answers(out, in net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := out.Read(buf)
		if n > 0 {
			if k.cut.Load() {
				<-k.healed
				return
			}
			if _, werr := in.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			in.Close()
			return
		}
	}
}
