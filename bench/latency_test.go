package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The histogram's percentiles match the exact ones of sorted samples
// within its precision, its mean, min and max are exact, and merging
// per-connection histograms equals recording everything in one.
func TestLatencyHistPercentiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 10001
	samples := make([]time.Duration, n)
	var whole, a, b LatencyHist
	var sum float64
	for i := range samples {
		// Log-uniform over 1 µs .. 100 ms: every bucket scale is used.
		d := time.Duration(math.Exp(math.Log(1e3) + rng.Float64()*(math.Log(1e8)-math.Log(1e3))))
		samples[i] = d
		sum += float64(d)
		whole.Record(d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	if a != whole {
		t.Fatal("merged halves differ from the whole")
	}
	slices.Sort(samples)
	for _, p := range []float64{0, 1, 25, 50, 90, 99, 99.9, 100} {
		rank := max(1, int(math.Ceil(p/100*n)))
		want := samples[rank-1]
		got := whole.Percentile(p)
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 1.0/histSub {
			t.Errorf("p%v = %v, exact %v (off by %.3f%%)", p, got, want, rel*100)
		}
	}
	if whole.Percentile(0) != samples[0] || whole.Percentile(100) != samples[n-1] || whole.Max() != samples[n-1] {
		t.Errorf("min/max: p0 %v p100 %v max %v, want %v and %v", whole.Percentile(0), whole.Percentile(100), whole.max, samples[0], samples[n-1])
	}
	if want := time.Duration(math.Round(sum / n)); whole.Mean() != want {
		t.Errorf("mean %v, want %v", whole.Mean(), want)
	}

	// Small values are exact; an empty histogram reports zeros.
	var small LatencyHist
	for v := range 199 {
		small.Record(time.Duration(v + 1))
	}
	if small.Percentile(50) != 100 || small.Percentile(99) != 198 || small.Mean() != 100 {
		t.Errorf("1..199 ns: p50 %v p99 %v mean %v", small.Percentile(50), small.Percentile(99), small.Mean())
	}
	var empty LatencyHist
	if empty.Percentile(50) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram reports a value")
	}
}

// Every value falls in the bucket histIndex gives it, and buckets tile
// the line in order, up to the largest uint64.
func TestHistBuckets(t *testing.T) {
	prevHi := uint64(0)
	for i := range histBuckets {
		lo, hi := histRange(i)
		if i > 0 && lo != prevHi+1 || lo > hi {
			t.Fatalf("bucket %d is [%d, %d] after one ending at %d", i, lo, hi, prevHi)
		}
		if histIndex(lo) != i || histIndex(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: indexes %d and %d", i, lo, hi, histIndex(lo), histIndex(hi))
		}
		prevHi = hi
	}
	if prevHi != math.MaxUint64 {
		t.Fatalf("last bucket ends at %d", prevHi)
	}
}
