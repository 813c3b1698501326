package watch_test

import (
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// shiftedClock is a wall clock that the test sets forward or back.
type shiftedClock struct{ by atomic.Int64 }

func (c *shiftedClock) now() time.Time { return time.Now().Add(time.Duration(c.by.Load())) }

func (c *shiftedClock) set(d time.Duration) { c.by.Store(int64(d)) }

// A wall clock set forward by more than the retention trims nothing: the
// entries are seconds old, not hours, whatever the wall clock says.
func TestWatchClockJumpsForward(t *testing.T) {
	var clock shiftedClock
	te := watchEngine(t, engine.Options{WatchRetention: time.Hour, Clock: clock.now})
	for i := range 5 {
		te.MustWrite(engine.OpInsert, users(te, 10*i, 10))
	}
	clock.set(3 * time.Hour)
	for i := 5; i < 10; i++ {
		te.MustWrite(engine.OpInsert, users(te, 10*i, 10))
	}
	if err := te.E.ChangeLog().Trim(); err != nil {
		t.Fatal(err)
	}
	r := te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: oldest()}, 100)
	if r.err != nil || len(r.changes) != 100 || r.progress[0].GetCommit() != 0 {
		t.Fatalf("after the clock jumped 3h forward: %d changes from %v, %v; want all 100 from commit 0",
			len(r.changes), r.progress[0], r.err)
	}
}

// A fast wall clock corrected (set back by a year) neither reorders the
// entries nor stops trimming: with no byte bound, entries written under
// the fast clock still go once the retention has really passed.
func TestWatchClockJumpsBack(t *testing.T) {
	const retention = time.Second
	var clock shiftedClock
	clock.set(365 * 24 * time.Hour)
	te := watchEngine(t, engine.Options{WatchRetention: retention, Clock: clock.now})
	for i := range 5 {
		te.MustWrite(engine.OpInsert, users(te, 10*i, 10))
	}
	clock.set(0)
	for i := 5; i < 10; i++ {
		te.MustWrite(engine.OpInsert, users(te, 10*i, 10))
	}
	times := te.logTimes()
	for i := 1; i < len(times); i++ {
		if times[i] < times[i-1] {
			t.Fatalf("entry %d's time %d is before entry %d's (%d)", i+1, times[i], i, times[i-1])
		}
	}
	// The log's time runs at least 0.99 × real time.
	time.Sleep(retention + retention/20)
	te.MustWrite(engine.OpInsert, users(te, 100, 1)) // commit 11
	if err := te.E.ChangeLog().Trim(); err != nil {
		t.Fatal(err)
	}
	r := te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: oldest()}, 1)
	if r.err != nil || r.progress[0].GetCommit() != 10 || r.changes[0].GetPosition().GetCommit() != 11 {
		t.Fatalf("after the clock went back and the retention passed: oldest %v, first change %v, %v; want the 10 older entries trimmed",
			r.progress[0], r.changes, r.err)
	}
}

// logTimes returns the time of every change-log entry, oldest first, read
// through a reader of the log.
func (te *testEngine) logTimes() []int64 {
	te.T.Helper()
	log := te.E.ChangeLog()
	first, ok, err := log.First()
	if err != nil || !ok {
		te.T.Fatalf("the log's first commit: %v, %v", ok, err)
	}
	rd := log.NewReader(nil)
	defer rd.Close()
	rd.Round(first, log.Durable().Value())
	defer rd.End()
	var out []int64
	for rd.More() {
		_, le, err := rd.Next()
		if err != nil {
			te.T.Fatal(err)
		}
		if le == nil {
			break
		}
		out = append(out, le.Time())
		if err := rd.Done(); err != nil {
			te.T.Fatal(err)
		}
	}
	if err := rd.Err(); err != nil {
		te.T.Fatal(err)
	}
	return out
}
