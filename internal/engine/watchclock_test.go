package engine_test

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
		te.mustWrite(engine.OpInsert, users(te, 10*i, 10))
	}
	clock.set(3 * time.Hour)
	for i := 5; i < 10; i++ {
		te.mustWrite(engine.OpInsert, users(te, 10*i, 10))
	}
	if err := te.e.TrimLog(); err != nil {
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
		te.mustWrite(engine.OpInsert, users(te, 10*i, 10))
	}
	clock.set(0)
	for i := 5; i < 10; i++ {
		te.mustWrite(engine.OpInsert, users(te, 10*i, 10))
	}
	times := te.e.LogTimes()
	for i := 1; i < len(times); i++ {
		if times[i] < times[i-1] {
			t.Fatalf("entry %d's time %d is before entry %d's (%d)", i+1, times[i], i, times[i-1])
		}
	}
	// The log's time runs at least 0.99 × real time.
	time.Sleep(retention + retention/20)
	te.mustWrite(engine.OpInsert, users(te, 100, 1)) // commit 11
	if err := te.e.TrimLog(); err != nil {
		t.Fatal(err)
	}
	r := te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: oldest()}, 1)
	if r.err != nil || r.progress[0].GetCommit() != 10 || r.changes[0].GetPosition().GetCommit() != 11 {
		t.Fatalf("after the clock went back and the retention passed: oldest %v, first change %v, %v; want the 10 older entries trimmed",
			r.progress[0], r.changes, r.err)
	}
}
