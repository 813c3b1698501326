//go:build race

package server_test

// raceEnabled reports whether the race detector is on: it slows the
// power-cut test about thirtyfold, which then cuts fewer times.
const raceEnabled = true
