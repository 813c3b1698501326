package crash_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

func TestMain(m *testing.M) { servertest.Main(m, server.Config{}) }

// crashBatch is how many users, and as many orders, a batch holds; batch n
// is testschema.ShopBatch(n), whose ids encode n.
const crashBatch = testschema.ShopBatchSize

// crashShop is testschema.Shop with an aggregate index on orders: every
// order of a batch is in one group (its id is the batch), so each batch
// adds to one entry, which the checker compares with the orders after
// every kill.
var crashShop = strings.Replace(testschema.Shop,
	`option (protobase.v1.record) = { primary_key: ["user_id", "id"] };`,
	`option (protobase.v1.record) = {
    primary_key: ["user_id", "id"]
    aggregate: { name: "by_batch" group_by: "id" sum: ["total", "user_id"] }
  };`, 1)

// TestCrashRecovery kills an ingesting server process with SIGKILL at
// random points, restarts it on the same directory, and checks that every
// acknowledged batch is present and no batch is partly applied.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test starts child processes")
	}
	for _, b := range harness.Backends {
		t.Run(b.Name, func(t *testing.T) {
			harness.RunSeeds(t, []uint64{1}, func(t *testing.T, seed uint64) { runCrashRecovery(t, b, seed) })
		})
	}
}

func runCrashRecovery(t *testing.T, b harness.Backend, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	cfg := b.Config(t)

	const writers = 2
	var mu sync.Mutex
	acked := map[int]bool{}
	next := make([]int, writers) // next batch ordinal per writer
	for w := range next {
		next[w] = w
	}
	for round := 0; round < 4; round++ {
		cmd, addr := servertest.StartWith(t, cfg)
		c, err := client.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := c.ApplySchema(t.Context(), map[string]string{"shop.proto": crashShop}, client.SchemaOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				st, err := c.API().Write(ctx)
				if err != nil {
					return
				}
				for ctx.Err() == nil {
					mu.Lock()
					n := next[w]
					next[w] += writers // a batch sent but not acknowledged is never reused
					mu.Unlock()
					if err := st.Send(&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: testschema.ShopBatch(n), Ack: true}); err != nil {
						return
					}
					if _, err := st.Recv(); err != nil {
						return
					}
					mu.Lock()
					acked[n] = true
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond) // a random moment to crash, not a synchronisation
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		cancel()
		wg.Wait()
		c.Close()
		// What the next start recovers must be consistent too.
		b.MustCheck(t, cfg, fmt.Sprintf("after kill %d", round+1))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no batch was acknowledged before the kills")
	}

	ts := servertest.New(t, cfg)
	users := map[int]int{}
	for _, u := range ts.Records("shop.User") {
		users[int(servertest.FieldValue(u, "id").Int())/crashBatch]++
	}
	orders := map[int]int{}
	for _, o := range ts.Records("shop.Order") {
		orders[int(servertest.FieldValue(o, "id").Uint())]++
	}
	for n := range acked {
		if users[n] != crashBatch || orders[n] != crashBatch {
			t.Errorf("acknowledged batch %d: %d users, %d orders, want %d each", n, users[n], orders[n], crashBatch)
		}
	}
	for n, c := range users {
		if c != crashBatch || orders[n] != crashBatch {
			t.Errorf("batch %d partly applied: %d users, %d orders", n, c, orders[n])
		}
	}
	for n := range orders {
		if users[n] == 0 {
			t.Errorf("batch %d has orders and no users", n)
		}
	}
	t.Logf("%d batches acknowledged, %d present after %d kills", len(acked), len(users), 4)
	// The orders' aggregate index answers one group per present batch.
	agg, err := ts.C.Aggregate(t.Context(), &pb.Query{Type: "shop.Order", Explain: true},
		&pb.Aggregate{GroupBy: []string{"id"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(agg.Plan.GetText(), "aggregate index by_batch") || len(agg.Rows) != len(users) {
		t.Errorf("aggregate by batch: %d groups (plan %s), want %d", len(agg.Rows), agg.Plan.GetText(), len(users))
	}
	for _, r := range agg.Rows {
		if r.Values[0].GetNumberValue() != crashBatch {
			t.Errorf("batch %v: %v orders in the aggregate index, want %d", r.Group[0], r.Values[0], crashBatch)
		}
	}
	// The unique index survived the kills: every present batch's emails
	// are taken, and an email of a batch that is not present is free.
	for n := range users {
		_, err := ts.Write(harness.Insert, []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": -1, "email": "u%d@example.com"}`, n*crashBatch+crashBatch-1))})
		if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Field != "email" {
			t.Fatalf("batch %d: duplicate email refused on field %q, want email", n, we.Field)
		}
	}
	absent := 0
	for users[absent] != 0 {
		absent++
	}
	ts.MustWrite(harness.Insert, []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": -1, "email": "u%d@example.com"}`, absent*crashBatch))})
	ts.Stop()
	b.MustCheck(t, cfg, "at the end")
}
