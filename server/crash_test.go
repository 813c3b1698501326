package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m, server.Config{}) }

const crashBatch = 100

// crashRecords builds batch n: crashBatch users and crashBatch orders whose
// ids encode the batch, so a half-applied batch would show.
func crashRecords(n int) []*anypb.Any {
	recs := make([]*anypb.Any, 0, 2*crashBatch)
	for i := 0; i < crashBatch; i++ {
		id := int64(n*crashBatch + i)
		var u []byte
		u = protowire.AppendTag(u, 1, protowire.VarintType)
		u = protowire.AppendVarint(u, uint64(id))
		u = protowire.AppendTag(u, 2, protowire.BytesType)
		u = protowire.AppendString(u, fmt.Sprintf("user %d of batch %d", i, n))
		u = protowire.AppendTag(u, 3, protowire.BytesType)
		u = protowire.AppendString(u, fmt.Sprintf("u%d@example.com", id))
		var o []byte
		o = protowire.AppendTag(o, 1, protowire.VarintType)
		o = protowire.AppendVarint(o, uint64(id))
		o = protowire.AppendTag(o, 2, protowire.VarintType)
		o = protowire.AppendVarint(o, uint64(n))
		recs = append(recs,
			&anypb.Any{TypeUrl: "type.googleapis.com/shop.User", Value: u},
			&anypb.Any{TypeUrl: "type.googleapis.com/shop.Order", Value: o})
	}
	return recs
}

// TestCrashRecovery kills an ingesting server process with SIGKILL at
// random points, restarts it on the same directory, and checks that every
// acknowledged batch is present and no batch is partly applied.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test starts child processes")
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { runCrashRecovery(t, b) })
	}
}

func runCrashRecovery(t *testing.T, b backend) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	cfg := b.config(t)

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
			if _, err := c.ApplySchema(t.Context(), map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
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
					if err := st.Send(&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: crashRecords(n), Ack: true}); err != nil {
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
		b.mustCheck(t, cfg, fmt.Sprintf("after kill %d", round+1))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no batch was acknowledged before the kills")
	}

	ts := startServer(t, cfg)
	users := map[int]int{}
	for _, u := range ts.records("shop.User") {
		users[int(fieldValue(u, "id").Int())/crashBatch]++
	}
	orders := map[int]int{}
	for _, o := range ts.records("shop.Order") {
		orders[int(fieldValue(o, "id").Uint())]++
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
	// The unique index survived the kills: every present batch's emails
	// are taken, and an email of a batch that is not present is free.
	for n := range users {
		_, err := ts.write(insert, []*anypb.Any{ts.rec("shop.User", fmt.Sprintf(`{"id": -1, "email": "u%d@example.com"}`, n*crashBatch+crashBatch-1))})
		if we := writeErr(t, err, codes.AlreadyExists); we.Field != "email" {
			t.Fatalf("batch %d: duplicate email refused on field %q, want email", n, we.Field)
		}
	}
	absent := 0
	for users[absent] != 0 {
		absent++
	}
	ts.mustWrite(insert, []*anypb.Any{ts.rec("shop.User", fmt.Sprintf(`{"id": -1, "email": "u%d@example.com"}`, absent*crashBatch))})
	ts.stop()
	ts.c = nil
	b.mustCheck(t, cfg, "at the end")
}
