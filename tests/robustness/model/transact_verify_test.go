package model_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// The transaction model's check: the change log replayed against the
// transactions' reads and writes (TestTransactModel).

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
	state, vers, history, held := tmReplay(t, tmLog(t, ts), byTx, readOnly, &stats, runs, when)
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

// tmReplay replays the log's commits: each of a committed transaction
// (removed from byTx) is checked against the state before it and applied;
// after each, the read-only transactions whose reads hold are noted in
// held. It returns the state, each slot's version and what each slot held
// at each version (nil: removed).
func tmReplay(t *testing.T, log []tmCommit, byTx map[uint64]*tmRun, readOnly []*tmRun, stats *tmStats, runs []*tmRun, when string) (
	map[int64]tmSlot, map[int64]uint64, map[int64]map[uint64]*tmSlot, map[*tmRun]bool) {
	t.Helper()
	state := map[int64]tmSlot{}
	vers := map[int64]uint64{}
	history := map[int64]map[uint64]*tmSlot{} // slot -> version -> what it held (nil: removed)
	held := map[*tmRun]bool{}                 // read-only transactions whose reads held at once
	for i, c := range log {
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
	return state, vers, history, held
}
