package watch

import (
	"fmt"
	"slices"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// changeTally is what one watcher received, taken from the Go client's
// Watcher a message at a time (NextBatch), as a consumer of a busy
// database would take it: every change decoded into its message, op,
// type, key, record and position. Per message it keeps its arrival time
// and how many of its changes belong to each commit, and it checks what
// each change holds. Owned by the watcher's goroutine until the run
// collects it.
type changeTally struct {
	messages int
	changes  int64
	bytes    int64     // of the records received
	last     time.Time // arrival of the last message holding changes
	arrivals []arrival // in arrival order
}

// arrival is n changes of one commit that arrived in one message at at.
type arrival struct {
	commit uint64
	n      int64
	at     time.Time
}

// add tallies the changes of one message that arrived at now. Every
// change must be an insert of typ with its key, record and position, as
// the experiment writes them.
func (t *changeTally) add(batch []*pb.Change, typ string, now time.Time) error {
	t.messages++
	for _, ch := range batch {
		if ch.GetOp() != pb.ChangeOp_CHANGE_OP_INSERT || ch.GetType() != typ || ch.GetKey() == nil || ch.GetRecord() == nil || ch.GetPosition() == nil {
			return fmt.Errorf("change %v: not an insert of %s with its key, record and position", ch, typ)
		}
		t.bytes += int64(len(ch.GetRecord().GetValue()))
		commit := ch.GetPosition().GetCommit()
		t.changes++
		t.last = now
		if k := len(t.arrivals); k > 0 && t.arrivals[k-1].commit == commit && t.arrivals[k-1].at.Equal(now) {
			t.arrivals[k-1].n++
			continue
		}
		t.arrivals = append(t.arrivals, arrival{commit: commit, n: 1, at: now})
	}
	return nil
}

// latencies is a weighted set of delivery latencies in milliseconds.
type latencies struct {
	points []latency
	total  int64
}

type latency struct {
	ms float64
	n  int64
}

// add counts n changes of latency d. A change that reached the watcher
// before the writer had its acknowledgement (d < 0) counts as 0: the
// watcher was not behind, and a negative lag reads as a clock fault.
func (l *latencies) add(d time.Duration, n int64) {
	d = max(d, 0)
	l.points = append(l.points, latency{ms: float64(d) / float64(time.Millisecond), n: n})
	l.total += n
}

// quantile returns the smallest latency that q of the changes did not
// exceed (q in (0, 1]; 1 is the maximum). Sorts the points.
func (l *latencies) quantile(q float64) float64 {
	if l.total == 0 {
		return 0
	}
	slices.SortFunc(l.points, func(a, b latency) int {
		switch {
		case a.ms < b.ms:
			return -1
		case a.ms > b.ms:
			return 1
		}
		return 0
	})
	need := q * float64(l.total)
	var seen int64
	for _, p := range l.points {
		seen += p.n
		if float64(seen) >= need {
			return p.ms
		}
	}
	return l.points[len(l.points)-1].ms
}
