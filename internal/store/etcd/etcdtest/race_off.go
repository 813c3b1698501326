//go:build !race

package etcdtest

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
