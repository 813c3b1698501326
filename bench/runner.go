package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Count is what one run of a workload did.
type Count struct {
	// Ops is the operations completed (queries answered, records written).
	Ops int64
	// Bytes is the payload bytes moved, where the experiment reports them.
	Bytes int64
	// Elapsed is the time the operations took, when the workload times
	// itself (excluding its set-up); 0 lets Measure use the call's wall time.
	Elapsed time.Duration
}

// Workload runs one configuration for about d and reports what it did. It
// must finish every operation it starts (Drain responses, close streams)
// before returning, so that the next run starts on a quiet server.
type Workload func(ctx context.Context, d time.Duration) (Count, error)

// Sample is the per-run rates of one configuration.
type Sample struct {
	// Ops are operations per second; Bytes are bytes per second.
	Ops, Bytes []float64
}

// Measure warms a workload up for Warmup, then runs it Runs times for
// Duration each and returns each run's rates. label names the
// configuration in progress output.
func (e *Env) Measure(ctx context.Context, label string, w Workload) (Sample, error) {
	steps := e.Runs
	if e.Warmup > 0 {
		steps++
	}
	task := e.Progress.Task(label, steps)
	var s Sample
	note := "failed"
	defer func() { task.Done(note) }()
	if e.Warmup > 0 {
		if _, err := w(ctx, e.Warmup); err != nil {
			return Sample{}, fmt.Errorf("%s: warm-up: %w", label, err)
		}
		task.Step()
	}
	for i := 0; i < e.Runs; i++ {
		if err := ctx.Err(); err != nil {
			return Sample{}, err
		}
		start := time.Now()
		c, err := w(ctx, e.Duration)
		wall := time.Since(start)
		if err != nil {
			return Sample{}, fmt.Errorf("%s: run %d: %w", label, i+1, err)
		}
		el := c.Elapsed
		if el <= 0 {
			el = wall
		}
		if c.Ops <= 0 {
			return Sample{}, fmt.Errorf("%s: run %d: %w", label, i+1, errNoOps)
		}
		s.Ops = append(s.Ops, float64(c.Ops)/el.Seconds())
		s.Bytes = append(s.Bytes, float64(c.Bytes)/el.Seconds())
		task.Step()
	}
	note = fmt.Sprintf("%s op/s", formatValue(Summarize(s.Ops).Median))
	return s, nil
}

var errNoOps = errors.New("no operation completed")

// Run runs one experiment with opts and returns its result. It validates
// opts, stamps the result with the machine and start time, and stops the
// servers the experiment started.
func Run(ctx context.Context, x Experiment, opts Options, progress Progress) (res *Result, err error) {
	env := NewEnv(opts, progress)
	defer func() {
		if cerr := env.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("%s: stop servers: %w", x.Name(), cerr)
		}
	}()
	return env.Run(ctx, x)
}

// Run runs one experiment in e as the package's Run does, but leaves the
// servers it started running until e is closed, so that a test can read
// their counters (Targets).
func (e *Env) Run(ctx context.Context, x Experiment) (*Result, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	started := time.Now().UTC().Truncate(time.Second)
	res, err := x.Run(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", x.Name(), err)
	}
	res.Experiment = x.Name()
	res.Machine = CurrentMachine()
	res.Started = started
	if e.Quick {
		res.Notes = append(res.Notes, QuickNote)
	}
	return res, nil
}

// MeasureAlternately measures several workloads under the same
// conditions: it warms each up for Warmup, then runs them in turn, one run
// of each, Runs times, and returns each one's rates (sample i of each is
// from the same round). A ratio of two of them taken per round (Ratios)
// sees the same moment of a machine whose load changes, which medians of
// runs made one configuration after the other do not. labels name the
// workloads in progress output.
func (e *Env) MeasureAlternately(ctx context.Context, labels []string, ws []Workload) ([]Sample, error) {
	steps := e.Runs * len(ws)
	if e.Warmup > 0 {
		steps += len(ws)
	}
	task := e.Progress.Task(strings.Join(labels, ", "), steps)
	note := "failed"
	defer func() { task.Done(note) }()
	if e.Warmup > 0 {
		for i, w := range ws {
			if _, err := w(ctx, e.Warmup); err != nil {
				return nil, fmt.Errorf("%s: warm-up: %w", labels[i], err)
			}
			task.Step()
		}
	}
	out := make([]Sample, len(ws))
	for run := 0; run < e.Runs; run++ {
		for i, w := range ws {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			start := time.Now()
			c, err := w(ctx, e.Duration)
			wall := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("%s: run %d: %w", labels[i], run+1, err)
			}
			el := c.Elapsed
			if el <= 0 {
				el = wall
			}
			if c.Ops <= 0 {
				return nil, fmt.Errorf("%s: run %d: %w", labels[i], run+1, errNoOps)
			}
			out[i].Ops = append(out[i].Ops, float64(c.Ops)/el.Seconds())
			out[i].Bytes = append(out[i].Bytes, float64(c.Bytes)/el.Seconds())
			task.Step()
		}
	}
	meds := make([]string, len(out))
	for i, s := range out {
		meds[i] = formatValue(Summarize(s.Ops).Median)
	}
	note = strings.Join(meds, ", ") + " op/s"
	return out, nil
}

// Ratios returns a[i] / b[i] for each round of MeasureAlternately.
func Ratios(a, b []float64) []float64 {
	r := make([]float64, min(len(a), len(b)))
	for i := range r {
		r[i] = a[i] / b[i]
	}
	return r
}
