package harness

import (
	"slices"
	"testing"
)

// setSeedFlags sets -seed and -seeds for one test.
func setSeedFlags(t *testing.T, seed string, seeds int) {
	oldSeed, oldSeeds := *seedFlag, *seedsFlag
	*seedFlag, *seedsFlag = seed, seeds
	t.Cleanup(func() { *seedFlag, *seedsFlag = oldSeed, oldSeeds })
}

func TestSeeds(t *testing.T) {
	setSeedFlags(t, "", 0)
	if got := Seeds(t, 1, 2, 3); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("fixed seeds: %v", got)
	}
	setSeedFlags(t, "", 5)
	if got := Seeds(t, 1, 2, 3); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("-seeds=5 over fixed seeds: %v", got)
	}
	setSeedFlags(t, "", 1)
	if got := Seeds(t, 7, 9); !slices.Equal(got, []uint64{7}) {
		t.Errorf("-seeds=1 over fixed seeds: %v", got)
	}
	setSeedFlags(t, "42", 5)
	if got := Seeds(t, 1, 2, 3); !slices.Equal(got, []uint64{42}) {
		t.Errorf("-seed=42: %v", got)
	}
	setSeedFlags(t, "clock", 0)
	a, b := Seeds(t, 1, 2), Seeds(t, 1, 2)
	if len(a) != 2 || a[0] == a[1] || slices.Contains(a, 1) || slices.Equal(a, b) {
		t.Errorf("-seed=clock: %v then %v, want two new distinct seeds each time", a, b)
	}
}

// The replay command names the test down to the seed's subtest, and the
// seed by the flag; a seed's inner subtests are left out.
func TestReplay(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"TestWatchModel/pebble/seed=7", `go test -count=1 ./tests/robustness/model/ -run '^TestWatchModel$/^pebble$' -seed=7`},
		{"TestModelReads/etcd3/seed=7/schema1", `go test -count=1 ./tests/robustness/model/ -run '^TestModelReads$/^etcd3$' -seed=7`},
		{"TestPowerCut/seed=7", `go test -count=1 ./tests/robustness/model/ -run '^TestPowerCut$' -seed=7`},
	} {
		if got := Replay("tests/robustness/model", tc.name, 7); got != tc.want {
			t.Errorf("Replay(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
}
