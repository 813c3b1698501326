package bench

import (
	"math"
	"math/bits"
	"time"
)

// histSubBits sets the histogram's precision: every power of two is split
// into 1<<histSubBits buckets, so a recorded value is off by less than
// 1/(1<<histSubBits) (0.8%) of itself. Values below 1<<(histSubBits+1)
// ns are exact.
const histSubBits = 7

const (
	histSub = 1 << histSubBits
	// histBuckets covers every uint64: the largest shift is 63-histSubBits.
	histBuckets = (64-histSubBits)*histSub + histSub
)

// LatencyHist is an HDR-style histogram of durations in nanoseconds:
// exact below 256 ns, then 128 buckets per power of two. Recording is an
// index computation and an increment, with no allocation.
//
// Invariant: n is the sum of counts; when n > 0, min ≤ every recorded
// value ≤ max and sum is their exact total.
type LatencyHist struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      float64 // ns; float64 so that hours of samples cannot overflow
	min, max uint64
}

// histIndex returns the bucket of v: v itself below 2*histSub, else the
// top histSubBits+1 bits of v (its mantissa, in [histSub, 2*histSub))
// offset by histSub buckets per shift.
func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1
	return shift*histSub + int(v>>shift)
}

// histRange returns the smallest and largest value of bucket i.
func histRange(i int) (lo, hi uint64) {
	if i < 2*histSub {
		return uint64(i), uint64(i)
	}
	shift := i/histSub - 1
	mant := uint64(i - shift*histSub)
	return mant << shift, (mant+1)<<shift - 1
}

// Record adds one latency (negative durations count as 0).
func (h *LatencyHist) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.n++
	h.sum += float64(v)
}

// Merge adds o's samples to h.
func (h *LatencyHist) Merge(o *LatencyHist) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Mean returns the exact average, or 0 without samples.
func (h *LatencyHist) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.n)))
}

// Percentile returns the value below or at which p percent of the samples
// fall (the sample of rank ⌈p/100·n⌉, as HdrHistogram and wrk define it),
// as the middle of its bucket clamped to [min, max] (exactly min and max
// at the extremes); 0 without samples.
func (h *LatencyHist) Percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	switch rank { // the extremes are known exactly
	case 1:
		return time.Duration(h.min)
	case h.n:
		return time.Duration(h.max)
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := histRange(i)
			v := lo + (hi-lo)/2
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max) // unreachable while the invariant holds
}

// Max returns the largest recorded value, or 0 without samples.
func (h *LatencyHist) Max() time.Duration { return time.Duration(h.max) }

// N returns the number of recorded values.
func (h *LatencyHist) N() uint64 { return h.n }

// Reset forgets every recorded value.
func (h *LatencyHist) Reset() { *h = LatencyHist{} }
