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
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// TestTransactModel runs transactions (client.Transact) from several
// goroutines, on two servers sharing the store on etcd, and checks them
// against a model replayed from the change log. Every write transaction
// inserts a mark naming it, so each commit of the log is known to be one
// transaction's; replayed in commit order, each committed transaction
// must have read exactly the state before its commit (keys and query
// windows), its writes must be the commit's changes, and the state the
// log makes must be the store's, at the versions the log gives. Every
// read-only transaction that committed must have read one state the log
// passed through. A transaction that failed (ABORTED after its attempts,
// or another error) must not be in the log, and the condition an ABORTED
// names must be one of its reads, the version found one the record had,
// holding something else than the transaction read. The servers restart
// between phases, and the checker runs on the store.
func TestTransactModel(t *testing.T) {
	for _, b := range harness.Backends {
		t.Run(b.Name, func(t *testing.T) {
			txs := 40
			if testing.Short() {
				txs = 15
			}
			harness.RunSeeds(t, []uint64{1}, func(t *testing.T, seed uint64) { runTransactModel(t, b, seed, txs) })
		})
	}
}

const txModelProto = `syntax = "proto3";
package tm;
import "protobase/v1/options.proto";

message Slot {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "group" }
  };
  int64 id = 1;
  int64 value = 2;
  string group = 3;
  uint64 by = 4;
}

message Mark {
  option (protobase.v1.record) = { primary_key: "tx" };
  uint64 tx = 1;
}
`

const (
	tmSlots = 12 // slots 0..11 are read and written; 0..7 exist at first
	tmTotal = 12 // the slot a group's total is written to
	// tmGoroutines run transactions at once; the first gives up after
	// two aborted attempts, so that some transactions fail ABORTED.
	tmGoroutines = 6
)

// tmSlot is a slot record; by names the transaction that wrote it last,
// so that no two writes leave the same bytes.
type tmSlot struct {
	id, value int64
	group     string
	by        uint64
}

func tmGroup(id int64) string { return fmt.Sprintf("g%d", id%3) }

func (s tmSlot) any() *anypb.Any {
	b := appendInt(nil, 1, uint64(s.id))
	b = appendInt(b, 2, uint64(s.value))
	b = appendStr(b, 3, s.group)
	b = appendInt(b, 4, s.by)
	return &anypb.Any{TypeUrl: "type.googleapis.com/tm.Slot", Value: b}
}

func tmMark(tx uint64) *anypb.Any {
	return &anypb.Any{TypeUrl: "type.googleapis.com/tm.Mark", Value: appendInt(nil, 1, tx)}
}

// tmDecode decodes a slot, or a mark (into by).
func tmDecode(b []byte) (tmSlot, error) {
	var s tmSlot
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return s, protowire.ParseError(m)
		}
		v, _ := protowire.ConsumeVarint(b)
		switch {
		case num == 1:
			s.id = int64(v)
		case num == 2:
			s.value = int64(v)
		case num == 3 && typ == protowire.BytesType:
			str, _ := protowire.ConsumeString(b)
			s.group = str
		case num == 4:
			s.by = v
		}
		b = b[m:]
	}
	return s, nil
}

// tmRead is one condition of a transaction's last attempt, in the order
// the client makes them: a key read (seen nil: absent), or a query of a
// group's slots in id order, limited, with the slots it returned.
type tmRead struct {
	query bool
	id    int64
	seen  *tmSlot
	group string
	limit int
	desc  bool
	seenQ []tmSlot
}

func (rd tmRead) String() string {
	if rd.query {
		return fmt.Sprintf("query group %s limit %d desc %v: %+v", rd.group, rd.limit, rd.desc, rd.seenQ)
	}
	if rd.seen == nil {
		return fmt.Sprintf("slot %d: absent", rd.id)
	}
	return fmt.Sprintf("slot %d: %+v", rd.id, *rd.seen)
}

// tmWrite is one write of a transaction; a patch's value is the amount
// added.
type tmWrite struct {
	op pb.WriteOp
	s  tmSlot
}

// tmRun is one transaction: what its last attempt read and wrote, and
// what Transact returned.
type tmRun struct {
	tx     uint64
	desc   string
	reads  []tmRead
	writes []tmWrite
	err    error
	// conditioned holds the slots the attempt made key conditions of.
	conditioned map[int64]bool
}

func (r *tmRun) get(tx *client.Tx, ids ...int64) ([]*tmSlot, error) {
	keys := make([]any, len(ids))
	for i, id := range ids {
		keys[i] = id
	}
	recs, err := tx.Get("tm.Slot", keys...)
	if err != nil {
		return nil, err
	}
	out := make([]*tmSlot, len(ids))
	for i, a := range recs {
		if a != nil {
			s, err := tmDecode(a.GetValue())
			if err != nil {
				return nil, err
			}
			out[i] = &s
		}
		if !r.conditioned[ids[i]] {
			r.conditioned[ids[i]] = true
			r.reads = append(r.reads, tmRead{id: ids[i], seen: out[i]})
		}
	}
	return out, nil
}

func (r *tmRun) query(tx *client.Tx, group string, limit int, desc bool) ([]tmSlot, error) {
	recs, err := tx.Query(&pb.Query{Type: "tm.Slot", Filter: fmt.Sprintf("group = %q", group),
		Limit: uint64(limit), Order: &pb.Order{Descending: desc}})
	if err != nil {
		return nil, err
	}
	read := tmRead{query: true, group: group, limit: limit, desc: desc}
	for _, a := range recs {
		s, err := tmDecode(a.GetValue())
		if err != nil {
			return nil, err
		}
		read.seenQ = append(read.seenQ, s)
	}
	r.reads = append(r.reads, read)
	if limit > 0 && len(recs) == limit { // a full window: its slots are key conditions too
		for _, s := range read.seenQ {
			if !r.conditioned[s.id] {
				r.conditioned[s.id] = true
				r.reads = append(r.reads, tmRead{id: s.id, seen: &s})
			}
		}
	}
	return read.seenQ, nil
}

func (r *tmRun) write(tx *client.Tx, op pb.WriteOp, s tmSlot) error {
	r.writes = append(r.writes, tmWrite{op: op, s: s})
	switch op {
	case pb.WriteOp_WRITE_OP_INSERT:
		return tx.Insert(s.any())
	case pb.WriteOp_WRITE_OP_UPDATE:
		return tx.Update(s.any())
	case pb.WriteOp_WRITE_OP_UPSERT:
		return tx.Upsert(s.any())
	case pb.WriteOp_WRITE_OP_REMOVE:
		return tx.Remove(s.any())
	}
	return tx.Patch([]string{"by"}, []string{"value"}, s.any())
}

// tmPlan is what one transaction sets out to do, drawn before it runs so
// that every attempt means the same.
type tmPlan struct {
	kind    int
	a, b, c int64
	amount  int64
	group   string
	limit   int
	desc    bool
}

func tmNewPlan(rng *rand.Rand) tmPlan {
	ids := rng.Perm(tmSlots)
	return tmPlan{kind: rng.IntN(6), a: int64(ids[0]), b: int64(ids[1]), c: int64(ids[2]),
		amount: 1 + rng.Int64N(4), group: tmGroup(rng.Int64N(3)), limit: pick(rng, 0, 0, 2, 3), desc: rng.IntN(2) == 0}
}

// fn is the transaction's function: it reads, decides on what it read,
// and writes (with the mark) or only reads.
func (p tmPlan) fn(run *tmRun) func(tx *client.Tx) error {
	return func(tx *client.Tx) error {
		*run = tmRun{tx: run.tx, desc: run.desc, conditioned: map[int64]bool{}}
		err := p.body(tx, run)
		if err == nil && len(run.writes) > 0 {
			err = tx.Insert(tmMark(run.tx))
		}
		return err
	}
}

func (p tmPlan) body(tx *client.Tx, run *tmRun) error {
	by := run.tx
	switch p.kind {
	case 0, 1: // move amount from a to b, creating either if absent
		ss, err := run.get(tx, p.a, p.b)
		switch {
		case err != nil:
			return err
		case ss[0] == nil:
			return run.write(tx, pb.WriteOp_WRITE_OP_INSERT, tmSlot{id: p.a, value: 5, group: tmGroup(p.a), by: by})
		case ss[1] == nil:
			return run.write(tx, pb.WriteOp_WRITE_OP_UPSERT, tmSlot{id: p.b, value: 5, group: tmGroup(p.b), by: by})
		case ss[0].value >= p.amount:
			a, b := *ss[0], *ss[1]
			a.value, a.by, b.value, b.by = a.value-p.amount, by, b.value+p.amount, by
			if err := run.write(tx, pb.WriteOp_WRITE_OP_UPDATE, a); err != nil {
				return err
			}
			return run.write(tx, pb.WriteOp_WRITE_OP_UPDATE, b)
		}
		return nil // too little to move: a read-only transaction
	case 2: // create a, remove it when low, or take one from it
		ss, err := run.get(tx, p.a)
		switch {
		case err != nil:
			return err
		case ss[0] == nil:
			return run.write(tx, pb.WriteOp_WRITE_OP_INSERT, tmSlot{id: p.a, value: 3, group: tmGroup(p.a), by: by})
		case ss[0].value < 3:
			return run.write(tx, pb.WriteOp_WRITE_OP_REMOVE, tmSlot{id: p.a})
		}
		s := *ss[0]
		s.value, s.by = s.value-1, by
		return run.write(tx, pb.WriteOp_WRITE_OP_UPDATE, s)
	case 3: // write the total of a group's window
		ss, err := run.query(tx, p.group, p.limit, p.desc)
		if err != nil {
			return err
		}
		var sum int64
		for _, s := range ss {
			sum += s.value
		}
		return run.write(tx, pb.WriteOp_WRITE_OP_UPSERT, tmSlot{id: tmTotal, value: sum, group: "total", by: by})
	case 4: // add to c without reading it, and maybe move one from a to c's total
		if err := run.write(tx, pb.WriteOp_WRITE_OP_PATCH, tmSlot{id: p.c, value: p.amount, by: by}); err != nil {
			return err
		}
		ss, err := run.get(tx, p.a)
		if err != nil || ss[0] == nil {
			return err
		}
		s := *ss[0]
		s.value, s.by = s.value+1, by
		return run.write(tx, pb.WriteOp_WRITE_OP_UPDATE, s)
	}
	// An audit: read only.
	if _, err := run.get(tx, p.a, p.b, p.c); err != nil {
		return err
	}
	_, err := run.query(tx, p.group, p.limit, p.desc)
	return err
}

func runTransactModel(t *testing.T, b harness.Backend, seed uint64, txs int) {
	cfg := b.Config(t)
	var runs []*tmRun
	for phase := range 2 {
		servers := []*servertest.Server{servertest.New(t, cfg)}
		if cfg.Etcd.Endpoints != nil { // a second server on the same store
			cfg2 := cfg
			cfg2.DataDir = t.TempDir()
			servers = append(servers, servertest.New(t, cfg2))
		}
		if phase == 0 {
			v := servers[0].MustApply(map[string]string{"tm.proto": txModelProto}).Version
			for _, s := range servers[1:] {
				tmAwaitSchema(t, s, v) // the other server learns it from the store
			}
			var seedRecs []*anypb.Any
			for id := range int64(8) {
				seedRecs = append(seedRecs, tmSlot{id: id, value: 10, group: tmGroup(id)}.any())
			}
			servers[0].MustWrite(harness.Insert, seedRecs)
		}
		runs = append(runs, tmPhase(t, servers, seed, phase, txs)...)
		for _, s := range servers {
			s.Stop()
		}
		when := fmt.Sprintf("after phase %d", phase)
		b.MustCheck(t, cfg, when)
		ts := servertest.New(t, cfg)
		stats := tmVerify(t, ts, runs, when)
		ts.Stop()
		t.Logf("%s: %v", when, stats)
	}
}

// tmAwaitSchema waits until s serves schema version v.
func tmAwaitSchema(t *testing.T, s *servertest.Server, v uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := s.C.GetSchema(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version >= v {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second server still serves schema version %d, not %d", resp.Version, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tmPhase runs txs transactions on each of tmGoroutines goroutines,
// spread over servers, and returns them.
func tmPhase(t *testing.T, servers []*servertest.Server, seed uint64, phase, txs int) []*tmRun {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := make([][]*tmRun, tmGoroutines)
	var wg sync.WaitGroup
	for g := range tmGoroutines {
		c := servers[g%len(servers)].C
		rng := rand.New(rand.NewPCG(seed, uint64(1000*phase+g)))
		opts := client.TxOptions{MaxAttempts: 8, Backoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
		if g == 0 {
			opts.MaxAttempts = 2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range txs {
				p := tmNewPlan(rng)
				run := &tmRun{tx: uint64(1_000_000*(phase+1) + 1000*g + n), desc: fmt.Sprintf("%+v", p)}
				run.err = c.Transact(ctx, p.fn(run), opts)
				out[g] = append(out[g], run)
			}
		}()
	}
	wg.Wait()
	var all []*tmRun
	for _, rs := range out {
		all = append(all, rs...)
	}
	for _, r := range all {
		r.checkErr(t)
	}
	return all
}

// checkErr fails t unless r committed, gave up ABORTED, or failed on a
// blind write: a patch of a slot it did not read, removed meanwhile
// (NOT_FOUND). A write to a slot it read cannot fail on the slot's
// existence: the read's condition fails first, and the commit is ABORTED.
func (r *tmRun) checkErr(t *testing.T) {
	t.Helper()
	var ce *client.Error
	switch {
	case r.err == nil, errors.Is(r.err, client.ErrAborted):
		return
	case !errors.As(r.err, &ce) || ce.Status.Code() != codes.NotFound && ce.Status.Code() != codes.AlreadyExists:
		t.Fatalf("transaction %d (%s): %v", r.tx, r.desc, r.err)
	}
	i := int(ce.Write.GetRecord())
	if i >= len(r.writes) {
		t.Fatalf("transaction %d (%s): %v names record %d of its %d writes and a mark", r.tx, r.desc, r.err, i, len(r.writes))
	}
	if id := r.writes[i].s.id; r.conditioned[id] {
		t.Errorf("transaction %d (%s) failed with %v on slot %d, which it read: the read's condition should have failed the commit with ABORTED, for Transact to run it again (reads %v)",
			r.tx, r.desc, r.err, id, r.reads)
	}
}

// tmMatches is the window of a group query on state.
func tmMatches(state map[int64]tmSlot, group string, limit int, desc bool) []tmSlot {
	var out []tmSlot
	for _, s := range state {
		if s.group == group {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b tmSlot) int {
		if desc {
			a, b = b, a
		}
		return int(a.id - b.id)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// holds reports which read of r does not hold on state, or -1.
func (r *tmRun) holds(state map[int64]tmSlot) int {
	for i, rd := range r.reads {
		if rd.query {
			if !slices.Equal(tmMatches(state, rd.group, rd.limit, rd.desc), rd.seenQ) {
				return i
			}
			continue
		}
		s, ok := state[rd.id]
		if ok != (rd.seen != nil) || ok && s != *rd.seen {
			return i
		}
	}
	return -1
}

// apply returns state after r's writes.
func (r *tmRun) apply(state map[int64]tmSlot) map[int64]tmSlot {
	next := make(map[int64]tmSlot, len(state))
	for k, v := range state {
		next[k] = v
	}
	for _, w := range r.writes {
		switch w.op {
		case pb.WriteOp_WRITE_OP_REMOVE:
			delete(next, w.s.id)
		case pb.WriteOp_WRITE_OP_PATCH:
			s := next[w.s.id]
			s.value, s.by = s.value+w.s.value, w.s.by
			next[w.s.id] = s
		default:
			next[w.s.id] = w.s
		}
	}
	return next
}

// tmStats is what a verification found.
type tmStats struct {
	commits, readOnly, aborted, blind int
}

func (s tmStats) String() string {
	return fmt.Sprintf("%d transactions committed writes, %d read only, %d gave up ABORTED, %d failed on a blind write",
		s.commits, s.readOnly, s.aborted, s.blind)
}

// tmCommit is one commit of the log: its position, the transaction its
// mark names (0: none), and its slot changes.
type tmCommit struct {
	pos   uint64
	tx    uint64
	slots []*pb.Change
}

// tmLog reads the change log of ts whole and cuts it into commits.
func tmLog(t *testing.T, ts *servertest.Server) []tmCommit {
	t.Helper()
	end := harness.LastCommit(ts, "tm.Slot", "tm.Mark")
	w := harness.NewWatcher(&pb.WatchRequest{Types: []string{"tm.Slot", "tm.Mark"}})
	w.CatchUp(t, ts, end)
	var out []tmCommit
	for _, ch := range w.Got {
		pos := ch.GetPosition().GetCommit()
		if len(out) == 0 || out[len(out)-1].pos != pos {
			out = append(out, tmCommit{pos: pos})
		}
		c := &out[len(out)-1]
		if ch.GetType() == "tm.Mark" {
			m, err := tmDecode(ch.GetRecord().GetValue())
			if err != nil || c.tx != 0 {
				t.Fatalf("commit %d: a second mark, or one that does not decode (%v)", pos, err)
			}
			c.tx = uint64(m.id)
			continue
		}
		c.slots = append(c.slots, ch)
	}
	return out
}

// tmVerify replays the log of ts against runs and checks the store.
func tmVerify(t *testing.T, ts *servertest.Server, runs []*tmRun, when string) tmStats {
	t.Helper()
	byTx := map[uint64]*tmRun{}
	var readOnly []*tmRun
	var stats tmStats
	for _, r := range runs {
		switch {
		case r.err == nil && len(r.writes) > 0:
			byTx[r.tx] = r
		case r.err == nil:
			readOnly = append(readOnly, r)
		case errors.Is(r.err, client.ErrAborted):
			stats.aborted++
		default:
			stats.blind++
		}
	}
	state := map[int64]tmSlot{}
	vers := map[int64]uint64{}
	history := map[int64]map[uint64]*tmSlot{} // slot -> version -> what it held (nil: removed)
	held := map[*tmRun]bool{}                 // read-only transactions whose reads held at once
	for i, c := range tmLog(t, ts) {
		var next map[int64]tmSlot
		if c.tx == 0 { // the slots the test created
			if i != 0 {
				t.Fatalf("%s: commit %d has no mark", when, c.pos)
			}
			next = map[int64]tmSlot{}
			for _, ch := range c.slots {
				s, err := tmDecode(ch.GetRecord().GetValue())
				if err != nil {
					t.Fatalf("%s: commit %d: %v", when, c.pos, err)
				}
				next[s.id] = s
			}
		} else {
			r := byTx[c.tx]
			if r == nil {
				t.Fatalf("%s: commit %d is of transaction %d, which did not commit (it returned %v)", when, c.pos, c.tx, tmErr(runs, c.tx))
			}
			delete(byTx, c.tx)
			stats.commits++
			if i := r.holds(state); i >= 0 {
				t.Fatalf("%s: transaction %d (%s) committed at %d, but its read %d (%v) does not hold just before: %v",
					when, r.tx, r.desc, c.pos, i, r.reads[i], state)
			}
			next = r.apply(state)
		}
		tmChanges(t, c, state, next, when)
		for _, ch := range c.slots {
			s, _ := tmDecode(ch.GetKey().GetValue())
			vers[s.id] = c.pos
			if history[s.id] == nil {
				history[s.id] = map[uint64]*tmSlot{}
			}
			if v, ok := next[s.id]; ok {
				history[s.id][c.pos] = &v
			} else {
				history[s.id][c.pos] = nil
			}
		}
		state = next
		for _, r := range readOnly {
			held[r] = held[r] || r.holds(state) < 0
		}
	}
	for tx, r := range byTx {
		t.Fatalf("%s: transaction %d (%s) committed, and is not in the log", when, tx, r.desc)
	}
	for _, r := range readOnly {
		if !held[r] {
			t.Fatalf("%s: read-only transaction %d (%s) committed reads %v that held together at no commit of the log", when, r.tx, r.desc, r.reads)
		}
	}
	stats.readOnly = len(readOnly)
	tmCheckAborted(t, runs, history, when)
	tmCompare(t, ts, state, vers, when)
	return stats
}

func tmErr(runs []*tmRun, tx uint64) error {
	for _, r := range runs {
		if r.tx == tx {
			return r.err
		}
	}
	return errors.New("no such transaction")
}

// tmChanges checks the slot changes of commit c take state to next.
func tmChanges(t *testing.T, c tmCommit, state, next map[int64]tmSlot, when string) {
	t.Helper()
	changed := map[int64]bool{}
	for _, ch := range c.slots {
		k, _ := tmDecode(ch.GetKey().GetValue())
		changed[k.id] = true
		want, ok := next[k.id]
		if ch.GetOp() == pb.ChangeOp_CHANGE_OP_REMOVE {
			if ok {
				t.Fatalf("%s: commit %d (transaction %d) removes slot %d, which the transaction leaves as %+v", when, c.pos, c.tx, k.id, want)
			}
			continue
		}
		got, err := tmDecode(ch.GetRecord().GetValue())
		if err != nil || !ok || got != want {
			t.Fatalf("%s: commit %d (transaction %d) writes slot %d as %+v, the transaction leaves %+v (present %v)", when, c.pos, c.tx, k.id, got, want, ok)
		}
	}
	for id, s := range next {
		if old, ok := state[id]; (!ok || old != s) && !changed[id] {
			t.Fatalf("%s: commit %d (transaction %d) lacks the write of slot %d (%+v)", when, c.pos, c.tx, id, s)
		}
	}
	for id := range state {
		if _, ok := next[id]; !ok && !changed[id] {
			t.Fatalf("%s: commit %d (transaction %d) lacks the removal of slot %d", when, c.pos, c.tx, id)
		}
	}
}

// tmCheckAborted checks each transaction that gave up ABORTED: the
// condition named is one of its last attempt's reads, and for a key read
// the version found is one the slot had (0: none), holding other than
// what was read.
func tmCheckAborted(t *testing.T, runs []*tmRun, history map[int64]map[uint64]*tmSlot, when string) {
	t.Helper()
	for _, r := range runs {
		var ce *client.Error
		if !errors.Is(r.err, client.ErrAborted) || !errors.As(r.err, &ce) {
			continue
		}
		we := ce.Write
		if we == nil || we.Condition == nil || int(*we.Condition) >= len(r.reads) {
			t.Fatalf("%s: transaction %d (%s) gave up on %v, which names no condition among its %d reads", when, r.tx, r.desc, r.err, len(r.reads))
		}
		rd := r.reads[*we.Condition]
		if rd.query {
			continue // the highest version of a window; on etcd the conflict may be coarser
		}
		v := we.GetVersion()
		found, ok := history[rd.id][v]
		switch {
		case v == 0 && rd.seen == nil:
			t.Fatalf("%s: transaction %d (%s) gave up on condition %d: slot %d absent, as read", when, r.tx, r.desc, *we.Condition, rd.id)
		case v != 0 && !ok:
			t.Fatalf("%s: transaction %d (%s) gave up on condition %d finding slot %d at version %d, which it never had", when, r.tx, r.desc, *we.Condition, rd.id, v)
		case v != 0 && found != nil && rd.seen != nil && *found == *rd.seen:
			t.Fatalf("%s: transaction %d (%s) gave up on condition %d finding slot %d at version %d, which holds what it read", when, r.tx, r.desc, *we.Condition, rd.id, v)
		}
	}
}

// tmCompare checks the store's slots and versions against state.
func tmCompare(t *testing.T, ts *servertest.Server, state map[int64]tmSlot, vers map[int64]uint64, when string) {
	t.Helper()
	sc := ts.C.Scan(t.Context(), &pb.Query{Type: "tm.Slot", Versions: true}, client.ScanOptions{})
	n := 0
	for sc.Next() {
		n++
		s, err := tmDecode(sc.Record().GetValue())
		if want, ok := state[s.id]; err != nil || !ok || s != want || sc.Version() != vers[s.id] {
			t.Fatalf("%s: slot %d is %+v at version %d, the log makes it %+v at %d", when, s.id, s, sc.Version(), want, vers[s.id])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(state) {
		t.Fatalf("%s: %d slots stored, the log makes %d", when, n, len(state))
	}
}
