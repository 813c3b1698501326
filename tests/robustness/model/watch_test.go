package model_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// The watch model test writes random batches of every operation across
// two types from one writer while several watchers run, with and without
// a filter, with and without old records, with small batch sizes (so
// responses cut commits), each disconnecting now and then and resuming
// from the last progress or the last change it saw. The writer keeps the
// committed history (each batch's position comes back in its response);
// every watcher's changes must equal that history filtered by its types
// and filter, in order, exactly once.

// wantChange is one change of the committed history.
type wantChange struct {
	commit   uint64
	index    uint32
	op       pb.ChangeOp
	typ      string
	id       int64 // the "id" field of the record (or old record)
	rec, old *anypb.Any
}

// watchModel is the writer's model: the stored records by type and key.
type watchModel struct {
	ts     *servertest.Server
	rng    *rand.Rand
	stored map[string]map[int64]*anypb.Any // type -> key -> record
	hist   []wantChange
	// distinct keeps each batch's keys distinct: on etcd a batch that
	// writes a key twice is one change of it (docs/watch.md).
	distinct bool
}

func (m *watchModel) record(typ string, id int64) *anypb.Any {
	n := m.rng.IntN(1000)
	if typ == "shop.User" {
		return m.ts.Rec(typ, fmt.Sprintf(`{"id": %d, "name": "n%d", "email": "e%d@x"}`, id, n, id))
	}
	return m.ts.Rec(typ, fmt.Sprintf(`{"user_id": 7, "id": %d, "total": %d}`, id, n))
}

func (m *watchModel) keyOnly(typ string, id int64) *anypb.Any {
	if typ == "shop.User" {
		return m.ts.Rec(typ, fmt.Sprintf(`{"id": %d}`, id))
	}
	return m.ts.Rec(typ, fmt.Sprintf(`{"user_id": 7, "id": %d}`, id))
}

// batch writes one random valid batch and adds its changes to the history.
func (m *watchModel) batch() {
	t := m.ts.T
	ops := []pb.WriteOp{pb.WriteOp_WRITE_OP_INSERT, pb.WriteOp_WRITE_OP_UPDATE, pb.WriteOp_WRITE_OP_UPSERT, pb.WriteOp_WRITE_OP_REMOVE}
	op := ops[m.rng.IntN(len(ops))]
	n := 1 + m.rng.IntN(6)
	var recs []*anypb.Any
	var changes []wantChange
	used := map[string]bool{}
	for range n * 3 {
		if len(recs) == n {
			break
		}
		typ := []string{"shop.User", "shop.Order"}[m.rng.IntN(2)]
		id := int64(m.rng.IntN(20))
		k := fmt.Sprint(typ, id)
		cur, exists := m.stored[typ][id]
		if (op == pb.WriteOp_WRITE_OP_INSERT && exists) || ((op == pb.WriteOp_WRITE_OP_UPDATE || op == pb.WriteOp_WRITE_OP_REMOVE) && !exists) {
			continue
		}
		if used[k] && (op != pb.WriteOp_WRITE_OP_UPSERT || m.distinct) {
			continue // an upsert may repeat a key in its batch
		}
		used[k] = true
		c := wantChange{index: uint32(len(changes)), typ: typ, id: id, old: cur}
		if op == pb.WriteOp_WRITE_OP_REMOVE {
			recs = append(recs, m.keyOnly(typ, id))
			c.op = pb.ChangeOp_CHANGE_OP_REMOVE
			delete(m.stored[typ], id)
		} else {
			c.rec = m.record(typ, id)
			recs = append(recs, c.rec)
			c.op = pb.ChangeOp_CHANGE_OP_UPDATE
			if !exists {
				c.op = pb.ChangeOp_CHANGE_OP_INSERT
			}
			m.stored[typ][id] = c.rec
		}
		changes = append(changes, c)
	}
	if len(recs) == 0 {
		return
	}
	resp := m.ts.MustWrite(op, recs)
	for i := range changes {
		changes[i].commit = resp.Position
	}
	if len(m.hist) > 0 && m.hist[len(m.hist)-1].commit >= resp.Position {
		t.Fatalf("batch position %d not after %d", resp.Position, m.hist[len(m.hist)-1].commit)
	}
	m.hist = append(m.hist, changes...)
}

// modelWatcher is one watcher's settings and what it received.
type modelWatcher struct {
	types  []string
	filter string
	match  func(id int64) bool
	old    bool
	batch  uint32
	got    []*pb.Change
	// resumes counts reconnections; byChange those that resumed from the
	// last change's position rather than the last progress.
	resumes, byChange int
}

// run watches until its progress reaches end (set before done is
// closed), reconnecting at random. A session also ends when it receives
// nothing for a while (its deadline): a watcher whose filter matches no
// more changes must get to look at done.
func (mw *modelWatcher) run(ts *servertest.Server, rng *rand.Rand, done <-chan struct{}, end *uint64) error {
	last := &pb.Position{} // after commit 0: the whole history
	finished := func() bool {
		select {
		case <-done:
			return last.Index == nil && last.GetCommit() >= *end
		default:
			return false
		}
	}
	for !finished() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		start := last
		if n := len(mw.got); n > 0 && rng.IntN(2) == 0 {
			mw.byChange++
			start = mw.got[n-1].Position
		}
		st, err := ts.C.API().Watch(ctx, &pb.WatchRequest{Types: mw.types, Filter: mw.filter, OldRecords: mw.old, BatchSize: mw.batch,
			Start: &pb.WatchStart{Start: &pb.WatchStart_After{After: start}}})
		if err != nil {
			cancel()
			return err
		}
		for quota := 1 + rng.IntN(8); quota > 0 && !finished(); {
			resp, err := st.Recv()
			if status.Code(err) == codes.DeadlineExceeded {
				break
			}
			if err != nil {
				cancel()
				return fmt.Errorf("recv: %w", err)
			}
			mw.got = append(mw.got, resp.Changes...)
			last = resp.Progress
			if len(resp.Changes) > 0 {
				quota--
			}
		}
		cancel()
		mw.resumes++
	}
	return nil
}

// want returns the history as this watcher should see it.
func (mw *modelWatcher) want(hist []wantChange) []wantChange {
	var out []wantChange
	for _, c := range hist {
		if slices.Contains(mw.types, c.typ) && (mw.match == nil || mw.match(c.id)) {
			out = append(out, c)
		}
	}
	return out
}

func (mw *modelWatcher) check(t *testing.T, name string, hist []wantChange) {
	t.Helper()
	want := mw.want(hist)
	if len(mw.got) != len(want) {
		t.Errorf("%s: %d changes, want %d (resumed %d times)", name, len(mw.got), len(want), mw.resumes)
	}
	for i := range min(len(mw.got), len(want)) {
		g, w := mw.got[i], want[i]
		old := w.old
		if !mw.old || w.op == pb.ChangeOp_CHANGE_OP_INSERT {
			old = nil
		}
		if g.Op != w.op || g.Type != w.typ || g.Position.GetCommit() != w.commit || g.Position.GetIndex() != w.index ||
			!proto.Equal(g.Record, w.rec) || !proto.Equal(g.OldRecord, old) || g.Key == nil {
			t.Errorf("%s: change %d = %v %s at %v, want %v %s at {%d %d} (id %d)", name, i, g.Op, g.Type, g.Position, w.op, w.typ, w.commit, w.index, w.id)
			return
		}
	}
}

func TestWatchModel(t *testing.T) {
	for _, b := range harness.Backends {
		t.Run(b.Name, func(t *testing.T) {
			seeds := []uint64{1, 2}
			if testing.Short() || b.Name != "pebble" {
				seeds = seeds[:1]
			}
			harness.RunSeeds(t, seeds, func(t *testing.T, seed uint64) {
				runWatchModel(t, b.Config(t), seed, 120)
			})
		})
	}
}

func runWatchModel(t *testing.T, cfg server.Config, seed uint64, batches int) {
	ts := servertest.New(t, cfg)
	ts.MustApply(map[string]string{"shop.proto": testschema.Shop})
	m := &watchModel{ts: ts, rng: rand.New(rand.NewPCG(seed, 17)),
		stored: map[string]map[int64]*anypb.Any{"shop.User": {}, "shop.Order": {}}, distinct: cfg.Store != ""}
	watchers := []*modelWatcher{
		{types: []string{"shop.User", "shop.Order"}, old: true},
		{types: []string{"shop.User", "shop.Order"}, batch: 1},
		{types: []string{"shop.User"}, batch: 3, old: true},
		{types: []string{"shop.Order"}, filter: "id < 8", match: func(id int64) bool { return id < 8 }, batch: 2},
		{types: []string{"shop.User", "shop.Order"}, filter: "id >= 15", match: func(id int64) bool { return id >= 15 }, old: true},
	}
	done := make(chan struct{})
	var end uint64
	errs := make([]error, len(watchers))
	var wg sync.WaitGroup
	for i, mw := range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = mw.run(ts, rand.New(rand.NewPCG(seed, uint64(i))), done, &end)
		}()
	}
	for range batches {
		m.batch()
	}
	if len(m.hist) > 0 {
		end = m.hist[len(m.hist)-1].commit
	}
	close(done)
	wg.Wait()
	for i, mw := range watchers {
		name := fmt.Sprintf("watcher %d %v %q", i, mw.types, mw.filter)
		if errs[i] != nil && !errors.Is(errs[i], context.Canceled) {
			t.Fatalf("%s: %v", name, errs[i])
		}
		mw.check(t, name, m.hist)
		if mw.resumes == 0 {
			t.Errorf("%s never resumed", name)
		}
	}
	t.Logf("%d changes in %d batches", len(m.hist), batches)
}

// The model again with a log tail of a few entries: watchers that
// resume or fall behind read storage, those at the tail read memory, and
// they move between the two while the writes go on.
func TestWatchModelSmallTail(t *testing.T) {
	harness.RunSeeds(t, []uint64{3}, func(t *testing.T, seed uint64) {
		cfg := harness.Backends[0].Config(t)
		if cfg.Store != "" {
			t.Fatalf("harness.Backends[0] is %q, want the embedded store", cfg.Store)
		}
		cfg.WatchTailBytes = 4 << 10
		runWatchModel(t, cfg, seed, 120)
	})
}
