package oneop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/protobase/protobase/bench"
)

// session is one client goroutine's connection state for one run: do
// performs one operation and waits for its answer; close ends what the
// session opened (streams, writers) and reports what went wrong there.
type session struct {
	do    func(ctx context.Context) error
	close func() error
}

// opener opens client cl's session for one run. Opening is not timed:
// the long-lived streams an application keeps open are opened once.
type opener func(ctx context.Context, cl int) (session, error)

// latencies are the per-run latency figures of one row, in microseconds.
type latencies struct {
	p50, p99, p999 []float64
}

// loop is a workload of clients goroutines, each issuing one operation
// at a time through its session, recording every operation's latency.
// Each run adds its percentiles (all clients pooled) to lat.
type loop struct {
	clients int
	open    opener
	// hists has one histogram per client, reset by every run. The loops
	// of one experiment share them (they run one at a time): a histogram
	// is 58 KiB.
	hists []bench.LatencyHist
	lat   latencies
}

// newLoop returns a loop of len(hists) clients.
func newLoop(hists []bench.LatencyHist, open opener) *loop {
	return &loop{clients: len(hists), open: open, hists: hists}
}

// workload runs the loop for d: every session is opened first, then all
// clients start together and stop at the deadline; the count is the
// operations completed between the start and the last client's stop.
func (l *loop) workload(ctx context.Context, d time.Duration) (bench.Count, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sessions := make([]session, 0, l.clients)
	closeAll := func() error {
		var errs []error
		for _, s := range sessions {
			errs = append(errs, s.close())
		}
		return errors.Join(errs...)
	}
	for cl := range l.clients {
		s, err := l.open(ctx, cl)
		if err != nil {
			cancel()
			return bench.Count{}, errors.Join(fmt.Errorf("open client %d: %w", cl, err), closeAll())
		}
		sessions = append(sessions, s)
	}
	counts, errs := make([]int64, l.clients), make([]error, l.clients)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for cl := range l.clients {
		h := &l.hists[cl]
		h.Reset()
		wg.Go(func() {
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := sessions[cl].do(ctx); err != nil {
					errs[cl] = err
					cancel()
					return
				}
				h.Record(time.Since(t0))
				counts[cl]++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cerr := closeAll()
	var total int64
	for cl := range counts {
		if errs[cl] != nil {
			return bench.Count{}, fmt.Errorf("client %d: %w", cl, errs[cl])
		}
		total += counts[cl]
	}
	if cerr != nil {
		return bench.Count{}, cerr
	}
	var all bench.LatencyHist
	for cl := range l.hists {
		all.Merge(&l.hists[cl])
	}
	us := func(p float64) float64 { return float64(all.Percentile(p)) / float64(time.Microsecond) }
	l.lat.p50 = append(l.lat.p50, us(50))
	l.lat.p99 = append(l.lat.p99, us(99))
	l.lat.p999 = append(l.lat.p999, us(99.9))
	return bench.Count{Ops: total, Elapsed: elapsed}, nil
}

// last returns the percentiles of the last n runs (the measured ones; a
// warm-up run comes first).
func (l *loop) last(n int) latencies {
	tail := func(xs []float64) []float64 { return xs[max(0, len(xs)-n):] }
	return latencies{p50: tail(l.lat.p50), p99: tail(l.lat.p99), p999: tail(l.lat.p999)}
}
