//go:build !race

package pebble

// raceEnabled reports whether the race detector is on; Pebble then enables
// its invariant checks, which allocate on read paths.
const raceEnabled = false
