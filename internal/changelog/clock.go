package changelog

import (
	"sync"
	"time"
)

// clock is the change log's time: what each entry records and what
// trimming by age compares with. It follows the wall clock (Options.Clock,
// by default time.Now), but never goes back and never runs more than
// 1/clockSlew faster or slower than the monotonic clock:
//
//   - a wall clock set forward (by more than the retention, say) does not
//     age the log at once: the log's time catches up at 1 % of real time,
//     so no entry is trimmed before about 0.99 × the retention has really
//     passed since it was written;
//   - a wall clock set back (a fast clock corrected) does not stop the
//     log's time: entries keep their order, and trimming goes on as real
//     time passes instead of waiting for the wall clock to reach the
//     entries written while it was fast.
//
// Only across a restart does the wall clock count as it is (the monotonic
// clock does not survive one): the log's time then starts at the wall
// clock, or at the newest entry's time when that is later.
type clock struct {
	wall func() time.Time // nil: time.Now
	mu   struct {
		sync.Mutex
		last int64     // the log's time last given, unix ns
		mono time.Time // when it was given, with its monotonic reading
	}
}

// clockSlew is how far the log's time may run from the monotonic
// clock's pace while it catches up with the wall clock: 1/100.
const clockSlew = 100

func newClock(wall func() time.Time) *clock {
	c := &clock{wall: wall}
	c.mu.mono = time.Now()
	c.mu.last = c.wallNow(c.mu.mono)
	return c
}

func (c *clock) wallNow(mono time.Time) int64 {
	if c.wall == nil {
		return mono.UnixNano()
	}
	return c.wall().UnixNano()
}

// startAt makes the log's time at least at, the newest entry's time, at
// Open.
func (c *clock) startAt(at int64) {
	c.mu.Lock()
	c.mu.last = max(c.mu.last, at)
	c.mu.Unlock()
}

// now returns the log's time now (unix ns); never less than it returned
// before.
func (c *clock) now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := time.Now()
	w := c.wallNow(m)
	d := max(int64(m.Sub(c.mu.mono)), 0)
	t := min(max(w, c.mu.last+d-d/clockSlew), c.mu.last+d+d/clockSlew)
	c.mu.last, c.mu.mono = t, m
	return t
}
