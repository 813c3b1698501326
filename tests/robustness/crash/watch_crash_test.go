package crash_test

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
	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// TestWatchCrash kills an ingesting server with SIGKILL while watchers are
// attached, several times, then checks each watcher's changes over all
// rounds against the log read whole after a clean restart: the same
// changes, in order, exactly once (a watcher never saw a batch that the
// kill lost), every acknowledged batch present, and each commit whole.
func TestWatchCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test starts child processes")
	}
	harness.RunSeeds(t, []uint64{1}, runWatchCrash)
}

func runWatchCrash(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	cfg := harness.Backends[0].Config(t) // pebble: the log is the engine's
	watchers := []*harness.Watcher{
		harness.NewWatcher(&pb.WatchRequest{Types: []string{"shop.User", "shop.Order"}}),
		harness.NewWatcher(&pb.WatchRequest{Types: []string{"shop.Order"}, BatchSize: 7}),
		harness.NewWatcher(&pb.WatchRequest{Types: []string{"shop.User"}, Filter: "id < 300"}),
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
			if _, err := c.ApplySchema(t.Context(), map[string]string{"shop.proto": testschema.Shop}, client.SchemaOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, cw := range watchers {
			wg.Add(1)
			go func() { defer wg.Done(); cw.Session(ctx, c) }()
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
				if err := st.Send(&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: testschema.ShopBatch(n), Ack: true}); err != nil {
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
	ts := servertest.New(t, cfg)
	end := harness.LastCommit(ts, "shop.User")
	for _, cw := range watchers {
		cw.CatchUp(t, ts, end)
	}
	truth := harness.NewWatcher(&pb.WatchRequest{Types: []string{"shop.User", "shop.Order"}})
	truth.CatchUp(t, ts, end)

	// Each commit in the log is one whole batch; acknowledged ones are there.
	batchOf := map[uint64]int{}
	count := map[uint64]int{}
	for _, ch := range truth.Got {
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
		for _, ch := range truth.Got {
			if slices.Contains(cw.Req.Types, ch.Type) && (cw.Req.Filter == "" || ch.Type != "shop.User" || crashUserID(ch) < 300) {
				want = append(want, ch)
			}
		}
		if len(cw.Got) != len(want) {
			t.Errorf("watcher %d: %d changes over the kills, want %d", i, len(cw.Got), len(want))
		}
		for j := range min(len(cw.Got), len(want)) {
			if !proto.Equal(cw.Got[j], want[j]) {
				t.Fatalf("watcher %d: change %d at %v differs from the log's (%v): it saw a change that did not survive", i, j, cw.Got[j].Position, want[j].Position)
			}
		}
	}
	t.Logf("%d batches acknowledged, %d commits in the log, watchers got %d/%d/%d changes",
		len(acked), len(count), len(watchers[0].Got), len(watchers[1].Got), len(watchers[2].Got))
}

// crashUserID reads the id of a change's user record.
func crashUserID(ch *pb.Change) int64 {
	v, _ := protowire.ConsumeVarint(ch.Record.GetValue()[1:])
	return int64(v)
}

// crashBatchOf returns the batch ordinal a change's record encodes (see
// testschema.ShopBatch).
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
