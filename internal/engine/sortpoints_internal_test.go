package engine

import "testing"

// The flag that makes Search sort a chunk's point lookups follows the last
// chunk's cache misses (more than an eighth), from either state, and a
// chunk of no lookups leaves it as it was.
func TestNoteMisses(t *testing.T) {
	e := openEngine(t)
	for _, c := range []struct {
		before    bool
		misses, n uint64
		after     bool
	}{
		{true, 0, 100, false},
		{false, 0, 100, false},
		{false, 12, 100, false},
		{false, 13, 100, true},
		{true, 13, 100, true},
		{true, 12, 100, false},
		{false, 1, 1, true},
		{true, 0, 0, true},
		{false, 0, 0, false},
	} {
		e.sortPoints.Store(c.before)
		e.noteMisses(c.misses, int(c.n))
		if got := e.sortPoints.Load(); got != c.after {
			t.Errorf("from %v, %d misses of %d: sort %v, want %v", c.before, c.misses, c.n, got, c.after)
		}
	}
}
