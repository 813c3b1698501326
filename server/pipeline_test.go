package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// The tests of pipelined writes on a shared store: a server keeps the
// batches of its streams in flight together, and two servers share the
// store. Each checks a guarantee the write lock gave on one server and the
// transactions' comparisons must give now: unique values, conditions and
// the order of a stream's batches.

// replayOnFailure logs how to run seed again if the test fails.
func replayOnFailure(t *testing.T, seed uint64) {
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d failed (replay: %s)", seed, harness.Replay("server", t.Name(), seed))
		}
	})
}

// writeErrorOf returns the status code and WriteError detail of err.
func writeErrorOf(err error) (codes.Code, *pb.WriteError) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if we, ok := d.(*pb.WriteError); ok {
			return st.Code(), we
		}
	}
	return st.Code(), nil
}

// Six writers, three on each of two servers, insert records that race for
// the same values: for even v each writer inserts its own record with the
// unique email of v, for odd v each inserts the record whose primary key
// is v. Each writer sends its values in its own order, in batches of four
// (a batch refused ALREADY_EXISTS is sent again without the record it
// names). Exactly one writer wins each value, the store holds exactly the
// records whose inserts were acknowledged, and the checker finds the
// indexes consistent.
func TestSharedPipelineUniqueRace(t *testing.T) {
	for _, seed := range harness.Seeds(t, 33) {
		replayOnFailure(t, seed)
		a, b, cfg := sharedPair(t, etcdtest.Roomy)
		const writers, values = 6, 60
		servers := []*testServer{a, b}
		var mu sync.Mutex
		won := map[int]int{} // value -> writer
		rec := func(w, v int) (id int, email string) {
			if v%2 == 0 {
				return 100000*(w+1) + v, fmt.Sprintf("v%d@example.com", v)
			}
			return v, fmt.Sprintf("w%d-v%d@example.com", w, v)
		}
		errs := make(chan error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			ts := servers[w%2]
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			order := rng.Perm(values)
			wg.Go(func() {
				for len(order) > 0 {
					n := min(4, len(order))
					batch := order[:n]
					order = order[n:]
					for len(batch) > 0 {
						recs := make([]*anypb.Any, len(batch))
						for i, v := range batch {
							id, email := rec(w, v)
							recs[i] = ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": %q}`, id, email))
						}
						_, err := ts.Write(insert, recs)
						if err == nil {
							mu.Lock()
							for _, v := range batch {
								if prev, ok := won[v]; ok {
									errs <- fmt.Errorf("value %d: writers %d and %d both acknowledged", v, prev, w)
								}
								won[v] = w
							}
							mu.Unlock()
							break
						}
						code, we := writeErrorOf(err)
						if code != codes.AlreadyExists || we == nil || int(we.Record) >= len(batch) {
							errs <- fmt.Errorf("writer %d: %w", w, err)
							return
						}
						batch = append(batch[:we.Record:we.Record], batch[we.Record+1:]...)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if len(won) != values {
			t.Errorf("%d values won, want %d", len(won), values)
		}
		stored := map[int64]string{}
		for _, m := range b.Records("shop.User") {
			stored[servertest.FieldValue(m, "id").Int()] = servertest.FieldValue(m, "email").String()
		}
		if len(stored) != values {
			t.Errorf("%d users stored, want %d", len(stored), values)
		}
		for v, w := range won {
			id, email := rec(w, v)
			if got, ok := stored[int64(id)]; !ok || got != email {
				t.Errorf("value %d won by writer %d: stored %q under id %d, want %q", v, w, got, id, email)
			}
		}
		backends[1].MustCheck(t, cfg, "after the races")
	}
}

// Eight clients, four on each of two servers, increment one counter by
// reading it and writing it back: half through transactions, half through
// a conditional update on the version read (sent again when ABORTED). No
// increment is lost: the counter ends at the number of increments.
func TestSharedPipelineCounter(t *testing.T) {
	servers := txServers(t, "etcd")
	ts := servers[0]
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("bank.Counter", `{"name": "hits"}`)})
	const clients = 8
	each := 15
	if testing.Short() {
		each = 5
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var attempts atomic.Int64
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for cl := range clients {
		srv := servers[cl%2]
		wg.Go(func() {
			for range each {
				var err error
				if cl%4 < 2 {
					err = increment(ctx, srv, &attempts)
				} else {
					err = incrementIfVersion(ctx, srv, &attempts)
				}
				if err != nil {
					errs <- fmt.Errorf("client %d: %w", cl, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	recs := ts.Records("bank.Counter")
	if want := int64(clients * each); len(recs) != 1 || servertest.FieldValue(recs[0], "value").Int() != want {
		t.Fatalf("counter %v, want %d", recs, want)
	}
	t.Logf("%d increments in %d attempts", clients*each, attempts.Load())
}

// incrementIfVersion adds one to the counter by a read and an update
// conditioned on the version read, read and sent again while ABORTED.
func incrementIfVersion(ctx context.Context, ts *testServer, attempts *atomic.Int64) error {
	for {
		attempts.Add(1)
		recs, vers, err := ts.C.GetVersioned(ctx, "bank.Counter", "hits")
		if err != nil {
			return err
		}
		v, err := decodeInt(ts.C, recs[0], "value")
		if err != nil {
			return err
		}
		_, err = ts.C.Apply(ctx, client.Batch{Op: client.Update,
			Records:    []proto.Message{ts.Rec("bank.Counter", fmt.Sprintf(`{"name": "hits", "value": %d}`, v+1))},
			Conditions: []*pb.Condition{client.IfVersion(0, vers[0])}})
		if status.Code(err) == codes.Aborted {
			continue
		}
		return err
	}
}

// Six streams, three on each of two servers, each send 25 batches without
// waiting for their acknowledgements. Batch n of a stream inserts its
// record n, removes its record n-1 (which only batch n-1 wrote) and sets
// its cursor to n, among a few other inserts of its own: a batch that
// committed before the one before it would fail its remove. Every stream
// ends without error, its acknowledgements come in order with increasing
// positions, and the store holds what the batches applied in stream order
// leave (the model).
func TestSharedPipelineStreamOrder(t *testing.T) {
	for _, seed := range harness.Seeds(t, 34) {
		replayOnFailure(t, seed)
		a, b, _ := sharedPair(t, etcdtest.Roomy)
		servers := []*testServer{a, b}
		const streams, batches = 6, 25
		models := make([]map[int64]string, streams) // id -> email, per stream
		errs := make(chan error, streams)
		var wg sync.WaitGroup
		for s := range streams {
			ts := servers[s%2]
			rng := rand.New(rand.NewPCG(seed, uint64(s)))
			models[s] = map[int64]string{}
			reqs := orderedBatches(ts, rng, s, batches, models[s])
			wg.Go(func() {
				if err := sendOrdered(ts, reqs); err != nil {
					errs <- fmt.Errorf("stream %d: %w", s, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		stored := map[int64]string{}
		for _, m := range b.Records("shop.User") {
			stored[servertest.FieldValue(m, "id").Int()] = servertest.FieldValue(m, "email").String()
		}
		want := 0
		for s, model := range models {
			want += len(model)
			for id, email := range model {
				if got, ok := stored[id]; !ok || got != email {
					t.Errorf("stream %d: user %d holds %q (stored %v), want %q", s, id, got, ok, email)
				}
			}
		}
		if len(stored) != want {
			t.Errorf("%d users stored, want %d", len(stored), want)
		}
	}
}

// orderedBatches builds stream s's batches and applies them to model.
func orderedBatches(ts *testServer, rng *rand.Rand, s, batches int, model map[int64]string) []*pb.WriteStreamRequest {
	base := int64(100000 * (s + 1))
	cursor := base + 99999
	extra := base + 50000
	user := func(id int64, email string) *anypb.Any {
		return ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": %q}`, id, email))
	}
	var reqs []*pb.WriteStreamRequest
	for n := range batches {
		req := &pb.WriteStreamRequest{Ack: true}
		add := func(op pb.WriteOp, id int64, email string) {
			req.Ops = append(req.Ops, op)
			req.Records = append(req.Records, user(id, email))
			if op == pb.WriteOp_WRITE_OP_REMOVE {
				delete(model, id)
			} else {
				model[id] = email
			}
		}
		add(pb.WriteOp_WRITE_OP_INSERT, base+int64(n), fmt.Sprintf("s%d-n%d@example.com", s, n))
		if n > 0 {
			add(pb.WriteOp_WRITE_OP_REMOVE, base+int64(n-1), "")
		}
		add(pb.WriteOp_WRITE_OP_UPSERT, cursor, fmt.Sprintf("s%d-cursor%d@example.com", s, n))
		for range rng.IntN(4) {
			add(pb.WriteOp_WRITE_OP_INSERT, extra, fmt.Sprintf("s%d-x%d@example.com", s, extra))
			extra++
		}
		reqs = append(reqs, req)
	}
	return reqs
}

// sendOrdered sends reqs on one Write stream without waiting, then checks
// their acknowledgements: one per batch, in order, with the records
// applied so far, at increasing positions.
func sendOrdered(ts *testServer, reqs []*pb.WriteStreamRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := ts.C.API().Write(ctx)
	if err != nil {
		return err
	}
	go func() {
		for _, r := range reqs {
			if st.Send(r) != nil {
				return // the stream ended: Recv has its status
			}
		}
		_ = st.CloseSend()
	}()
	var last, records uint64
	for i := 0; ; i++ {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			if i < len(reqs) {
				return fmt.Errorf("%d responses, want an acknowledgement for each of %d batches", i, len(reqs))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("after %d acknowledgements: %w", i, err)
		}
		if i >= len(reqs) {
			continue // a summary
		}
		records += uint64(len(reqs[i].Records))
		switch {
		case resp.Batch != uint64(i):
			return fmt.Errorf("acknowledgement %d names batch %d", i, resp.Batch)
		case resp.Records != records:
			return fmt.Errorf("acknowledgement %d counts %d records, want %d", i, resp.Records, records)
		case resp.Position <= last:
			return fmt.Errorf("acknowledgement %d at position %d, not after %d", i, resp.Position, last)
		}
		last = resp.Position
	}
}
