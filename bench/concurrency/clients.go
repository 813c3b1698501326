package concurrency

import (
	"context"
	"sync"
	"time"

	"github.com/protobase/protobase/bench"
)

// clientFunc is one client of a workload: it opens what it needs with
// ctx, then calls op until op returns false or an error, and closes.
// op performs one operation and reports whether the run goes on.
type clientFunc func(ctx context.Context, cl int, more func() bool) (int64, error)

// runClients is a workload of n clients running at once for d; its count
// is the operations they all completed. The first error ends them all.
func runClients(n int, client clientFunc) bench.Workload {
	return func(ctx context.Context, d time.Duration) (bench.Count, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		counts, errs := make([]int64, n), make([]error, n)
		var wg sync.WaitGroup
		start := time.Now()
		deadline := start.Add(d)
		more := func() bool { return time.Now().Before(deadline) }
		for cl := 0; cl < n; cl++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[cl], errs[cl] = client(ctx, cl, more)
				if errs[cl] != nil {
					cancel()
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		var total int64
		for cl := range counts {
			if errs[cl] != nil {
				return bench.Count{}, errs[cl]
			}
			total += counts[cl]
		}
		return bench.Count{Ops: total, Elapsed: elapsed}, nil
	}
}
