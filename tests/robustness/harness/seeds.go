package harness

import (
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The randomised tests draw everything from seeds, so that a failure
// replays. By default each runs its own fixed seeds (`make test` is
// reproducible); -seed=clock draws new ones from the clock (`make
// robustness`, to try new interleavings each run); -seed=N runs seed N
// alone, to replay a failure. -seeds=N runs N seeds instead of a test's
// own count.
var (
	seedFlag  = flag.String("seed", "", "seed of the randomised robustness tests: N replays seed N, clock draws new seeds; empty runs each test's fixed seeds")
	seedsFlag = flag.Int("seeds", 0, "how many seeds each randomised robustness test runs (0: the test's own count; ignored with -seed=N)")
)

// Seeds returns the seeds a test runs: its fixed ones by default (more,
// counting on from the last, when -seeds asks for more; fewer when it
// asks for fewer), as many drawn from the clock with -seed=clock, or only
// N with -seed=N. A malformed -seed fails the test.
func Seeds(t testing.TB, fixed ...uint64) []uint64 {
	t.Helper()
	n := len(fixed)
	if *seedsFlag > 0 {
		n = *seedsFlag
	}
	switch s := *seedFlag; s {
	case "":
		out := append([]uint64(nil), fixed[:min(n, len(fixed))]...)
		for len(out) < n {
			out = append(out, out[len(out)-1]+1)
		}
		return out
	case "clock":
		base := uint64(time.Now().UnixNano())
		out := make([]uint64, n)
		for i := range out {
			out[i] = base + uint64(i)
		}
		return out
	default:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("-seed=%q: want a number or clock", s)
		}
		return []uint64{v}
	}
}

// RunSeeds runs fn in a subtest "seed=N" for each seed of Seeds(fixed...),
// logging the seed, and on a failure the command that replays it.
func RunSeeds(t *testing.T, fixed []uint64, fn func(t *testing.T, seed uint64)) {
	t.Helper()
	pkg := callerPackage()
	for _, seed := range Seeds(t, fixed...) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d", seed)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("seed %d failed (replay: %s)", seed, Replay(pkg, t.Name(), seed))
				}
			})
			fn(t, seed)
		})
	}
}

// Replay is the command that runs seed alone of the test named name (a
// subtest "seed=N" is left out of the pattern: -seed=N names it) in
// package dir (relative to the module root).
func Replay(dir, name string, seed uint64) string {
	var parts []string
	for _, p := range strings.Split(name, "/") {
		if strings.HasPrefix(p, "seed=") {
			break
		}
		parts = append(parts, "^"+regexp.QuoteMeta(p)+"$")
	}
	return fmt.Sprintf("go test -count=1 ./%s/ -run '%s' -seed=%d", dir, strings.Join(parts, "/"), seed)
}

// callerPackage is the directory, relative to the module root, of the test
// file that called RunSeeds.
func callerPackage() string {
	_, file, _, ok := runtime.Caller(2)
	if !ok {
		return "tests/robustness/..."
	}
	dir := filepath.ToSlash(filepath.Dir(file))
	if i := strings.LastIndex(dir, "/tests/robustness/"); i >= 0 {
		return dir[i+1:]
	}
	return dir
}
