package server_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server/servertest"
)

// crashWatcher is a watcher that lives across server kills: what it
// received over all rounds, and the last progress it saw.
type crashWatcher struct {
	req  *pb.WatchRequest
	got  []*pb.Change
	last *pb.Position
}

// session watches from the last progress until the connection dies (or
// ctx ends).
func (cw *crashWatcher) session(ctx context.Context, c *client.Client) {
	req := proto.Clone(cw.req).(*pb.WatchRequest)
	req.Start = &pb.WatchStart{Start: &pb.WatchStart_After{After: cw.last}}
	st, err := c.API().Watch(ctx, req)
	if err != nil {
		return
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return
		}
		cw.got = append(cw.got, resp.Changes...)
		cw.last = resp.Progress
	}
}

// TestWatchCrash kills an ingesting server with SIGKILL while watchers are
// attached, several times, then checks each watcher's changes over all
// rounds against the log read whole after a clean restart: the same
// changes, in order, exactly once (a watcher never saw a batch that the
// kill lost), every acknowledged batch present, and each commit whole.
func TestWatchCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test starts child processes")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	cfg := backends[0].config(t) // pebble: the log is the engine's
	watchers := []*crashWatcher{
		{req: &pb.WatchRequest{Types: []string{"shop.User", "shop.Order"}}, last: &pb.Position{}},
		{req: &pb.WatchRequest{Types: []string{"shop.Order"}, BatchSize: 7}, last: &pb.Position{}},
		{req: &pb.WatchRequest{Types: []string{"shop.User"}, Filter: "id < 300"}, last: &pb.Position{}},
	}
	acked := map[uint64]int{} // commit -> batch ordinal, from acknowledgements
	next := 0
	for round := range 3 {
		cmd, addr := servertest.StartWith(t, cfg)
		c, err := client.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := c.ApplySchema(t.Context(), map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, cw := range watchers {
			wg.Add(1)
			go func() { defer wg.Done(); cw.session(ctx, c) }()
		}
		var mu sync.Mutex
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.API().Write(ctx)
			if err != nil {
				return
			}
			for ctx.Err() == nil {
				mu.Lock()
				n := next
				next++
				mu.Unlock()
				if err := st.Send(&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: crashRecords(n), Ack: true}); err != nil {
					return
				}
				ack, err := st.Recv()
				if err != nil {
					return
				}
				mu.Lock()
				acked[ack.Position] = n
				mu.Unlock()
			}
		}()
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond) // a random moment to crash, not a synchronisation
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		cancel()
		wg.Wait()
		c.Close()
	}
	if len(acked) == 0 {
		t.Fatal("no batch was acknowledged before the kills")
	}

	// A clean server: each watcher catches up, and the log is read whole.
	ts := startServer(t, cfg)
	end := ts.watch(&pb.WatchRequest{Types: []string{"shop.User"}}).first().GetCommit()
	for _, cw := range watchers {
		catchUp(t, ts, cw, end)
	}
	truth := &crashWatcher{req: &pb.WatchRequest{Types: []string{"shop.User", "shop.Order"}}, last: &pb.Position{}}
	catchUp(t, ts, truth, end)

	// Each commit in the log is one whole batch; acknowledged ones are there.
	batchOf := map[uint64]int{}
	count := map[uint64]int{}
	for _, ch := range truth.got {
		c := ch.Position.GetCommit()
		n := crashBatchOf(t, ch)
		if b, ok := batchOf[c]; ok && b != n {
			t.Fatalf("commit %d mixes batches %d and %d", c, b, n)
		}
		batchOf[c] = n
		count[c]++
	}
	for c, n := range count {
		if n != 2*crashBatch {
			t.Errorf("commit %d holds %d changes, want %d", c, n, 2*crashBatch)
		}
	}
	for c, n := range acked {
		if batchOf[c] != n || count[c] == 0 {
			t.Errorf("acknowledged batch %d at commit %d: the log has batch %d there (%d changes)", n, c, batchOf[c], count[c])
		}
	}
	for i, cw := range watchers {
		var want []*pb.Change
		for _, ch := range truth.got {
			if slices.Contains(cw.req.Types, ch.Type) && (cw.req.Filter == "" || ch.Type != "shop.User" || crashUserID(ch) < 300) {
				want = append(want, ch)
			}
		}
		if len(cw.got) != len(want) {
			t.Errorf("watcher %d: %d changes over the kills, want %d", i, len(cw.got), len(want))
		}
		for j := range min(len(cw.got), len(want)) {
			if !proto.Equal(cw.got[j], want[j]) {
				t.Fatalf("watcher %d: change %d at %v differs from the log's (%v): it saw a change that did not survive", i, j, cw.got[j].Position, want[j].Position)
			}
		}
	}
	t.Logf("%d batches acknowledged, %d commits in the log, watchers got %d/%d/%d changes",
		len(acked), len(count), len(watchers[0].got), len(watchers[1].got), len(watchers[2].got))
}

// catchUp resumes cw on ts until its progress reaches commit end.
func catchUp(t *testing.T, ts *testServer, cw *crashWatcher, end uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := proto.Clone(cw.req).(*pb.WatchRequest)
	req.Start = &pb.WatchStart{Start: &pb.WatchStart_After{After: cw.last}}
	st, err := ts.c.API().Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for cw.last.Index != nil || cw.last.GetCommit() < end {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("catch up from %v to %d: %v", cw.last, end, err)
		}
		cw.got = append(cw.got, resp.Changes...)
		cw.last = resp.Progress
	}
}

// crashUserID reads the id of a change's user record.
func crashUserID(ch *pb.Change) int64 {
	v, _ := protowire.ConsumeVarint(ch.Record.GetValue()[1:])
	return int64(v)
}

// crashBatchOf returns the batch ordinal a change's record encodes (see
// crashRecords).
func crashBatchOf(t *testing.T, ch *pb.Change) int {
	t.Helper()
	b := ch.Record.GetValue()
	if ch.Type == "shop.User" {
		v, n := protowire.ConsumeVarint(b[1:])
		if n < 0 {
			t.Fatalf("user record %x", b)
		}
		return int(v) / crashBatch
	}
	_, n := protowire.ConsumeVarint(b[1:]) // user_id
	v, m := protowire.ConsumeVarint(b[1+n+1:])
	if n < 0 || m < 0 {
		t.Fatalf("order record %x", b)
	}
	return int(v)
}
