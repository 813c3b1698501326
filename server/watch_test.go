package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// watchStream is an open Watch call and the position of the last message
// it received.
type watchStream struct {
	t      *testing.T
	st     grpc.ServerStreamingClient[pb.WatchResponse]
	cancel context.CancelFunc
	last   *pb.Position
}

func (ts *testServer) watch(req *pb.WatchRequest) *watchStream {
	ts.T.Helper()
	// A bound on a hang, not on speed: a test of 40 MiB records under the
	// race detector on a busy machine takes minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	st, err := ts.C.API().Watch(ctx, req)
	if err != nil {
		cancel()
		ts.T.Fatalf("watch: %v", err)
	}
	ws := &watchStream{t: ts.T, st: st, cancel: cancel}
	ts.T.Cleanup(cancel)
	return ws
}

// next receives changes until it has n of them (progress-only messages
// are noted and skipped).
func (ws *watchStream) next(n int) []*pb.Change {
	ws.t.Helper()
	var out []*pb.Change
	for len(out) < n {
		resp, err := ws.st.Recv()
		if err != nil {
			ws.t.Fatalf("watch recv after %d of %d changes: %v", len(out), n, err)
		}
		if resp.Progress == nil {
			ws.t.Fatalf("watch response without progress")
		}
		ws.last = resp.Progress
		out = append(out, resp.Changes...)
	}
	if len(out) > n {
		ws.t.Fatalf("got %d changes, want %d", len(out), n)
	}
	return out
}

// first receives the first message: progress-only, naming the start.
func (ws *watchStream) first() *pb.Position {
	ws.t.Helper()
	resp, err := ws.st.Recv()
	if err != nil {
		ws.t.Fatalf("watch first message: %v", err)
	}
	if len(resp.Changes) != 0 || resp.Progress == nil {
		ws.t.Fatalf("first watch message = %v, want progress only", resp)
	}
	ws.last = resp.Progress
	return resp.Progress
}

// watchErr returns the status a Watch call ends with.
func (ts *testServer) watchErr(req *pb.WatchRequest) *status.Status {
	ts.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := ts.C.API().Watch(ctx, req)
	if err != nil {
		return status.Convert(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			return status.Convert(err)
		}
	}
}

func after(commit uint64) *pb.WatchStart {
	return &pb.WatchStart{Start: &pb.WatchStart_After{After: &pb.Position{Commit: commit}}}
}

func afterIndex(commit uint64, index uint32) *pb.WatchStart {
	return &pb.WatchStart{Start: &pb.WatchStart_After{After: &pb.Position{Commit: commit, Index: proto.Uint32(index)}}}
}

func checkChange(t *testing.T, c *pb.Change, op pb.ChangeOp, typ string, rec, old *anypb.Any) {
	t.Helper()
	if c.Op != op || c.Type != typ {
		t.Fatalf("change = %v %s, want %v %s", c.Op, c.Type, op, typ)
	}
	if !proto.Equal(c.Record, rec) {
		t.Fatalf("%v record = %v, want %v", op, c.Record, rec)
	}
	if !proto.Equal(c.OldRecord, old) {
		t.Fatalf("%v old record = %v, want %v", op, c.OldRecord, old)
	}
	if c.Key == nil || c.Key.TypeUrl != "type.googleapis.com/"+typ {
		t.Fatalf("%v key = %v", op, c.Key)
	}
}

// TestWatchOps checks each write operation's change, in commit order,
// with positions that resume exactly after a change or a commit.
func TestWatchOps(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ws := ts.watch(&pb.WatchRequest{Types: []string{"shop.User"}, OldRecords: true})
	start := ws.first()

	u1 := ts.Rec("shop.User", `{"id": 1, "name": "ann", "email": "a@x"}`)
	u2 := ts.Rec("shop.User", `{"id": 2, "name": "bob", "email": "b@x"}`)
	u1b := ts.Rec("shop.User", `{"id": 1, "name": "ann2", "email": "a@x"}`)
	u3 := ts.Rec("shop.User", `{"id": 3, "name": "cy", "email": "c@x"}`)
	u3b := ts.Rec("shop.User", `{"id": 3, "name": "cy2", "email": "c@x"}`)
	o1 := ts.Rec("shop.Order", `{"user_id": 1, "id": 9}`)
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{u1, u2, o1})
	ts.MustWrite(pb.WriteOp_WRITE_OP_UPDATE, []*anypb.Any{u1b})
	ts.MustWrite(pb.WriteOp_WRITE_OP_UPSERT, []*anypb.Any{u3, u3b})
	ts.MustWrite(pb.WriteOp_WRITE_OP_REMOVE, []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "email": "2@x"}`)})

	got := ws.next(6)
	checkChange(t, got[0], pb.ChangeOp_CHANGE_OP_INSERT, "shop.User", u1, nil)
	checkChange(t, got[1], pb.ChangeOp_CHANGE_OP_INSERT, "shop.User", u2, nil)
	checkChange(t, got[2], pb.ChangeOp_CHANGE_OP_UPDATE, "shop.User", u1b, u1)
	checkChange(t, got[3], pb.ChangeOp_CHANGE_OP_INSERT, "shop.User", u3, nil)
	checkChange(t, got[4], pb.ChangeOp_CHANGE_OP_UPDATE, "shop.User", u3b, u3)
	checkChange(t, got[5], pb.ChangeOp_CHANGE_OP_REMOVE, "shop.User", nil, u2)
	wantPos := [][2]uint64{{start.Commit + 1, 0}, {start.Commit + 1, 1}, {start.Commit + 2, 0}, {start.Commit + 3, 0}, {start.Commit + 3, 1}, {start.Commit + 4, 0}}
	for i, c := range got {
		if c.Position.GetCommit() != wantPos[i][0] || c.Position.Index == nil || uint64(c.Position.GetIndex()) != wantPos[i][1] {
			t.Errorf("change %d position = %v, want %v", i, c.Position, wantPos[i])
		}
	}
	if !proto.Equal(got[5].Key, ts.Rec("shop.User", `{"id": 2}`)) {
		t.Errorf("remove key = %v, want the primary key fields only", got[5].Key)
	}
	if ws.last.GetCommit() != start.Commit+4 || ws.last.Index != nil {
		t.Errorf("last progress = %v, want after commit %d", ws.last, start.Commit+4)
	}

	// Resuming after a change gets the rest of its commit; after a commit,
	// the next commit. Without old_records, no old record.
	r := ts.watch(&pb.WatchRequest{Types: []string{"shop.User"}, Start: afterIndex(start.Commit+3, 0)})
	r.first()
	got = r.next(2)
	checkChange(t, got[0], pb.ChangeOp_CHANGE_OP_UPDATE, "shop.User", u3b, nil)
	checkChange(t, got[1], pb.ChangeOp_CHANGE_OP_REMOVE, "shop.User", nil, nil)
	r = ts.watch(&pb.WatchRequest{Types: []string{"shop.Order", "shop.User"}, Start: after(start.Commit)})
	r.first()
	got = r.next(7)
	checkChange(t, got[2], pb.ChangeOp_CHANGE_OP_INSERT, "shop.Order", o1, nil)

	// A filter sees only matching records (for a remove, the old one).
	r = ts.watch(&pb.WatchRequest{Types: []string{"shop.User"}, Filter: `name = "bob" OR id = 3`, Start: &pb.WatchStart{Start: &pb.WatchStart_Oldest{Oldest: true}}})
	r.first()
	got = r.next(4)
	for i, want := range []pb.ChangeOp{pb.ChangeOp_CHANGE_OP_INSERT, pb.ChangeOp_CHANGE_OP_INSERT, pb.ChangeOp_CHANGE_OP_UPDATE, pb.ChangeOp_CHANGE_OP_REMOVE} {
		if got[i].Op != want {
			t.Errorf("filtered change %d = %v, want %v", i, got[i].Op, want)
		}
	}
}

// TestWatchAcrossRestart checks that positions survive a restart and that
// a start the log cannot serve is OUT_OF_RANGE naming the oldest.
func TestWatchAcrossRestart(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ws := ts.watch(&pb.WatchRequest{Types: []string{"shop.User"}})
	start := ws.first()
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "1@x"}`)})
	ws.next(1)
	ws.cancel()
	ts = ts.restart()
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "email": "2@x"}`)})
	r := ts.watch(&pb.WatchRequest{Types: []string{"shop.User"}, Start: &pb.WatchStart{Start: &pb.WatchStart_After{After: ws.last}}})
	r.first()
	if got := r.next(1); got[0].Position.GetCommit() != start.Commit+2 {
		t.Errorf("after restart: change at %v, want commit %d", got[0].Position, start.Commit+2)
	}
	if st := ts.watchErr(&pb.WatchRequest{Types: []string{"shop.User"}, Start: after(start.Commit + 100)}); st.Code() != codes.OutOfRange {
		t.Errorf("start in the future: %v, want OUT_OF_RANGE", st)
	}

	// With the log off for a while, positions before the gap are gone.
	ts.Cfg.WatchRetention = -1
	ts = ts.restart()
	if st := ts.watchErr(&pb.WatchRequest{Types: []string{"shop.User"}}); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "--watch-retention") {
		t.Errorf("log off: %v, want FAILED_PRECONDITION naming --watch-retention", st)
	}
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 3, "email": "3@x"}`)})
	ts.Cfg.WatchRetention = 0
	ts = ts.restart()
	st := ts.watchErr(&pb.WatchRequest{Types: []string{"shop.User"}, Start: after(start.Commit)})
	if want := fmt.Sprintf("oldest position available is commit %d ", start.Commit+3); st.Code() != codes.OutOfRange || !strings.Contains(st.Message(), want) {
		t.Errorf("start before a gap: %v, want OUT_OF_RANGE with %q", st, want)
	}
	var named *pb.Position
	for _, d := range st.Details() {
		if p, ok := d.(*pb.Position); ok {
			named = p
		}
	}
	if named.GetCommit() != start.Commit+3 {
		t.Errorf("OUT_OF_RANGE detail = %v, want commit %d", named, start.Commit+3)
	}
	r = ts.watch(&pb.WatchRequest{Types: []string{"shop.User"}, Start: &pb.WatchStart{Start: &pb.WatchStart_Oldest{Oldest: true}}})
	if p := r.first(); p.GetCommit() != start.Commit+3 {
		t.Errorf("oldest = %v, want commit %d", p, start.Commit+3)
	}
}

// TestWatchHostile checks that bad and hostile Watch requests fail with
// the right code before anything is sent, and that extreme but valid
// ones work.
func TestWatchHostile(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "1@x"}`)})
	user := []string{"shop.User"}
	idx := func(i uint32) *uint32 { return &i }
	for _, c := range []struct {
		name string
		req  *pb.WatchRequest
		code codes.Code
	}{
		{"no types", &pb.WatchRequest{}, codes.InvalidArgument},
		{"empty type", &pb.WatchRequest{Types: []string{""}}, codes.NotFound},
		{"unknown type", &pb.WatchRequest{Types: []string{"shop.User", "shop.Nope"}}, codes.NotFound},
		{"helper message", &pb.WatchRequest{Types: []string{"shop.Line"}}, codes.NotFound},
		{"bad filter", &pb.WatchRequest{Types: user, Filter: `name = `}, codes.InvalidArgument},
		{"unknown field", &pb.WatchRequest{Types: user, Filter: `nope = 1`}, codes.InvalidArgument},
		{"field of one type only", &pb.WatchRequest{Types: []string{"shop.User", "shop.Order"}, Filter: `name = "a"`}, codes.InvalidArgument},
		{"both filters", &pb.WatchRequest{Types: user, Filter: `id = 1`, Where: &pb.Expr{}}, codes.InvalidArgument},
		{"empty where", &pb.WatchRequest{Types: user, Where: &pb.Expr{}}, codes.InvalidArgument},
		{"index without commit", &pb.WatchRequest{Types: user, Start: &pb.WatchStart{Start: &pb.WatchStart_After{After: &pb.Position{Index: idx(3)}}}}, codes.InvalidArgument},
		{"max commit", &pb.WatchRequest{Types: user, Start: after(1<<64 - 1)}, codes.OutOfRange},
		{"max commit and index", &pb.WatchRequest{Types: user, Start: afterIndex(1<<64-1, 1<<32-1)}, codes.OutOfRange},
	} {
		if st := ts.watchErr(c.req); st.Code() != c.code {
			t.Errorf("%s: %v, want %v", c.name, st, c.code)
		}
	}
	// Valid extremes: commit 0 (before everything), a huge batch size
	// (capped), an index past the commit's changes (the whole commit),
	// many copies of one type.
	many := make([]string, 10000)
	for i := range many {
		many[i] = "shop.User"
	}
	for _, req := range []*pb.WatchRequest{
		{Types: user, Start: after(0), BatchSize: 1<<32 - 1},
		{Types: many, Start: after(0)},
		{Types: user, Start: afterIndex(0+1, 0), BatchSize: 1},
	} {
		ws := ts.watch(req)
		ws.first()
		ts.MustWrite(pb.WriteOp_WRITE_OP_UPSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "email": "2@x"}`)})
		resp, err := ws.st.Recv()
		if err != nil || len(resp.Changes) == 0 {
			t.Fatalf("%v: %v, %v", req.Start, resp, err)
		}
		want := uint64(1)
		if req.Start.GetAfter().Index != nil {
			want = 2
		}
		if got := resp.Changes[0].Position.GetCommit(); got != want {
			t.Errorf("%v: first change at commit %d, want %d", req.Start, got, want)
		}
		ws.cancel()
	}
	ws := ts.watch(&pb.WatchRequest{Types: user, Start: afterIndex(1, 1<<32-1)})
	if p := ws.first(); p.GetCommit() != 1 || p.GetIndex() != 1<<32-1 {
		t.Errorf("start after an index past the commit's changes: progress %v", p)
	}
}

// TestWatchSlowWatcher checks that watchers that never read hold a
// bounded amount of the server's memory while ingest runs at full pace,
// that every write completes, and that the watchers, once they read, get
// every change.
func TestWatchSlowWatcher(t *testing.T) {
	if testing.Short() {
		t.Skip("ingests 40 MB")
	}
	ts := startServer(t, server.Config{NoSync: true})
	ts.C.Close()
	ts.C = nil
	c, err := client.Dial(ts.Srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ApplySchema(t.Context(), map[string]string{"bench.proto": benchProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	const watchers, batches = 4, 400
	base := heapInuse()
	streams := make([]grpc.ServerStreamingClient[pb.WatchResponse], watchers)
	for i := range streams {
		// Each on a connection of its own: a stream that is not read
		// stalls only its own connection's window.
		wc, err := client.Dial(ts.Srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer wc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if streams[i], err = wc.API().Watch(ctx, &pb.WatchRequest{Types: []string{"bench.Item"}, OldRecords: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := streams[i].Recv(); err != nil { // the start; then no reads
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // generous: a deadline, not a pace
	defer cancel()
	st, err := c.API().Upsert(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var peak uint64
	recs := make([]*anypb.Any, 1000)
	for i := range batches {
		for j := range recs {
			recs[j] = &anypb.Any{TypeUrl: "type.googleapis.com/bench.Item", Value: benchItem(nil, int64(i*1000+j))}
		}
		if err := st.Send(&pb.WriteRequest{Records: recs}); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if i%50 == 49 {
			peak = max(peak, heapInuse()-min(base, heapInuse()))
		}
	}
	if _, err := st.CloseAndRecv(); err != nil {
		t.Fatalf("ingest with watchers that do not read: %v", err)
	}
	held := heapInuse() - min(base, heapInuse())
	peak = max(peak, held)
	t.Logf("%d watchers not reading, %d records ingested: heap +%d MiB at the end, +%d MiB at most", watchers, batches*1000, held>>20, peak>>20)
	// Per watcher: one response being built (1 MiB), what flow control
	// lets gRPC queue on each side (4 MiB stream windows), and the
	// client's received messages; plus the memtable's growth.
	if limit := uint64(watchers*16+64) << 20; peak > limit {
		t.Errorf("heap grew by %d MiB with %d watchers not reading, more than %d MiB", peak>>20, watchers, limit>>20)
	}
	for i, ws := range streams {
		n := 0
		for n < batches*1000 {
			resp, err := ws.Recv()
			if err != nil {
				t.Fatalf("watcher %d after %d changes: %v", i, n, err)
			}
			n += len(resp.Changes)
		}
		if n != batches*1000 {
			t.Errorf("watcher %d got %d changes, want %d", i, n, batches*1000)
		}
	}
}

// TestWatchEtcdCompacted checks a start the etcd cluster has compacted:
// OUT_OF_RANGE naming the oldest revision kept, from which a watch works.
func TestWatchEtcdCompacted(t *testing.T) {
	cfg := backends[1].Config(t) // etcd, one member
	ts := startServer(t, cfg)
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	var last uint64
	for i := range 3 {
		last = ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d@x"}`, i, i))}).Position
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Etcd.Endpoints, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Compact(t.Context(), int64(last)); err != nil {
		t.Fatal(err)
	}
	st := ts.watchErr(&pb.WatchRequest{Types: []string{"shop.User"}, Start: after(1)})
	if st.Code() != codes.OutOfRange || !strings.Contains(st.Message(), "oldest position available") {
		t.Fatalf("start compacted away: %v, want OUT_OF_RANGE naming the oldest", st)
	}
	var oldest *pb.Position
	for _, d := range st.Details() {
		if p, ok := d.(*pb.Position); ok {
			oldest = p
		}
	}
	if oldest == nil || oldest.GetCommit() < last-1 || oldest.GetCommit() > last {
		t.Fatalf("oldest named %v, want about revision %d", oldest, last)
	}
	ws := ts.watch(&pb.WatchRequest{Types: []string{"shop.User"}, Start: &pb.WatchStart{Start: &pb.WatchStart_After{After: oldest}}})
	ws.first()
	w := ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 9, "email": "9@x"}`)})
	got := ws.next(1)
	if got[0].Position.GetCommit() != w.Position && oldest.GetCommit() == last {
		t.Fatalf("change at %v, want revision %d", got[0].Position, w.Position)
	}
}
