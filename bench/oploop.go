package bench

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// The lab's own measuring loop for client-side costs (what one call of a
// function costs in time and memory), so that the protobase binary does
// not link the testing package. It follows testing.B's method: run once,
// then grow the iteration count from the last run's time per op until one
// run lasts the minimum time; the last run is the measurement.

// OpResult is one measurement of an operation. Invariant: N ≥ 1.
type OpResult struct {
	// N is the iterations of the measured run, T its duration.
	N int
	T time.Duration
	// Bytes and Allocs are the heap bytes and objects the run allocated
	// (runtime.MemStats TotalAlloc and Mallocs, before and after).
	Bytes, Allocs uint64
}

// NsPerOp returns the time per operation in nanoseconds.
func (r OpResult) NsPerOp() float64 { return float64(r.T.Nanoseconds()) / float64(r.N) }

// BytesPerOp returns the bytes allocated per operation, rounded down as
// testing's B/op is.
func (r OpResult) BytesPerOp() uint64 { return r.Bytes / uint64(r.N) }

// AllocsPerOp returns the allocations per operation, rounded down as
// testing's allocs/op is.
func (r OpResult) AllocsPerOp() uint64 { return r.Allocs / uint64(r.N) }

// maxOpIterations caps the iteration count, as testing does.
const maxOpIterations = 1_000_000_000

// MeasureOp measures op, which must run the operation n times and may
// fail: it runs op(1), then op(n) with n predicted from the last run's
// time per op (at most 100 times the last n, at least 1.2 times it, and
// at least one more) until a run lasts at least minTime, and returns that
// run. Each run starts after a garbage collection, so that one run's
// garbage is not collected on the next one's clock. Memory is read from
// runtime.ReadMemStats around each run and counts every goroutine's
// allocations, so measure with the process otherwise idle.
func MeasureOp(minTime time.Duration, op func(n int) error) (OpResult, error) {
	if minTime <= 0 {
		return OpResult{}, errors.New("minimum time must be positive")
	}
	n := 1
	for {
		r, err := runOp(n, op)
		if err != nil {
			return OpResult{}, fmt.Errorf("%d iterations: %w", n, err)
		}
		if r.T >= minTime || n >= maxOpIterations {
			return r, nil
		}
		n = nextOpIterations(n, r.T, minTime)
	}
}

// nextOpIterations predicts the iterations that take goal after last
// iterations took took, and bounds the growth.
func nextOpIterations(last int, took, goal time.Duration) int {
	prevNs := max(took.Nanoseconds(), 1)
	n := int64(last) * goal.Nanoseconds() / prevNs
	n += n / 5 // aim 20% over, so that a run rarely falls just short
	n = min(n, 100*int64(last))
	n = max(n, int64(last)+1)
	return int(min(n, maxOpIterations))
}

// runOp runs op(n) once, timed, with the memory it allocated.
func runOp(n int, op func(n int) error) (OpResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	err := op(n)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		return OpResult{}, err
	}
	return OpResult{N: n, T: took, Bytes: after.TotalAlloc - before.TotalAlloc, Allocs: after.Mallocs - before.Mallocs}, nil
}
