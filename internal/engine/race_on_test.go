//go:build race

package engine_test

// raceEnabled reports whether the race detector is on: sync.Pool then
// drops a share of what is put back, and Pebble checks its invariants, so
// pooled paths allocate and allocation counts say nothing.
const raceEnabled = true
