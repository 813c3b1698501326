//go:build race

package harness

// RaceEnabled reports whether the race detector is on: it slows the
// power-cut test about thirtyfold, which then cuts fewer times.
const RaceEnabled = true
