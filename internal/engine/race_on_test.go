//go:build race

package engine_test

import "testing"

// raceEnabled reports whether the race detector is on: sync.Pool then
// drops a share of what is put back, and Pebble checks its invariants, so
// pooled paths allocate and allocation counts say nothing.
const raceEnabled = true

// skipLargeInRaceRun skips t in the race run (go test -race -short): t
// writes a hundred thousand records or more to test a bound, which the race
// detector slows several times over while its goroutines are those of
// smaller tests; the plain run tests it in full.
func skipLargeInRaceRun(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("large data: left to the run without the race detector")
	}
}
