// Package watch is the lab's watch experiment: how soon a change reaches
// its watchers after the write's durable acknowledgement, how many
// changes per second each watcher receives, and what watching costs the
// writer, while durable ingest runs at batch 1,000.
package watch

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/bench"
)

func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }

// Experiment runs durable ingest through one Write stream, every batch
// acknowledged, with no watcher and with each count of Watchers watching
// the written type from before the first write. In each repetition the
// configurations run back to back (none and one watcher trading places
// every other repetition), so the ingest rate with one watcher is divided
// by the rate without one of the same repetition. Each run has a server of
// its own (runOn): with the embedded server, a fresh store, so that no run
// inherits the store, and the flushes and compactions still due, that the
// run before it wrote.
//
// Latency is measured in this one process on the monotonic clock: the
// writer notes when each batch's acknowledgement arrives, by its position
// (the commit), each watcher when each message arrives and the commits of
// its changes; a change's latency is its arrival minus its commit's
// acknowledgement. Both wait for the same fsync, so a change may arrive
// before its acknowledgement: that change's latency counts as 0, the
// watcher being no later than the writer. Each watcher is
// the Go client's Watcher taking a message at a time (NextBatch), every
// change decoded and checked, as a consumer would take it: what a watcher
// costs the writer includes its client's receiving.
type Experiment struct {
	Batch    int
	Watchers []int

	// nextID hands out item ids so that no two inserts collide.
	nextID atomic.Int64
	// written counts the records acknowledged, and applied the records
	// the embedded servers counted (each read before it closed), which
	// must match (checked by the tests).
	written, applied atomic.Int64
}

// Name implements bench.Experiment.
func (*Experiment) Name() string { return "watch" }

// Describe implements bench.Experiment.
func (*Experiment) Describe() string {
	return "change feeds: write acknowledgement to watcher receipt (p50, p99, max), changes/s per watcher, and durable ingest with and without watchers"
}

// Flags implements bench.Experiment.
func (g *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&g.Batch, "batch", 1000, "records per write request (1..100000)")
	fs.IntSliceVar(&g.Watchers, "watchers", nil, "watcher counts measured beside none (default 1,10)")
}

// maxWatchers bounds --watchers: each is a stream and a goroutine here and
// on the server. maxBatch is the lab's largest batch (bench.CheckBatches).
const (
	maxWatchers = 1000
	maxBatch    = 100000
)

// Run implements bench.Experiment.
func (g *Experiment) Run(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	if g.Batch == 0 {
		g.Batch = 1000
	}
	if g.Batch < 1 || g.Batch > maxBatch {
		return nil, fmt.Errorf("--batch: %d is out of range 1..%d", g.Batch, maxBatch)
	}
	if len(g.Watchers) == 0 {
		g.Watchers = []int{1, 10}
	}
	for _, n := range g.Watchers {
		if n < 1 || n > maxWatchers {
			return nil, fmt.Errorf("--watchers: %d is out of range 1..%d", n, maxWatchers)
		}
	}
	g.nextID.Store(time.Now().UnixNano() / 1000)
	configs := append([]int{0}, g.Watchers...)
	if env.Warmup > 0 {
		if _, err := g.runOn(ctx, env, 1, env.Warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	task := env.Progress.Task(fmt.Sprintf("batch=%d watchers=%v", g.Batch, configs), env.Runs*len(configs))
	outs := make([][]*outcome, len(configs)) // by config, then run
	for run := 0; run < env.Runs; run++ {
		for _, i := range runOrder(len(configs), run) {
			n := configs[i]
			o, err := g.runOn(ctx, env, n, env.Duration)
			if err != nil {
				task.Done("failed")
				return nil, fmt.Errorf("watchers=%d run %d: %w", n, run+1, err)
			}
			outs[i] = append(outs[i], o)
			task.Step()
		}
	}
	first := outs[0][0]
	res := &bench.Result{Chart: &bench.Chart{
		Title: "Write acknowledgement to watcher receipt, p99 and max", Kind: bench.Bars,
		XLabel: "watchers", YLabel: "ms", X: "watchers", Series: "percentile", Unit: "ms",
	}}
	res.Notes = append(res.Notes,
		"no published figure: no seed measured change feeds, so the published and ratio columns are empty",
		fmt.Sprintf("durable ingest (sync=%s) through one Write stream at batch %d, every batch acknowledged; each watcher on a connection of its own, in the same process as the writer", onOff(first.sync), g.Batch),
		storeNote(first.embedded),
		"latency: a change's arrival at a watcher minus the arrival of its commit's acknowledgement at the writer (monotonic clock); 0 when the change arrived first")
	g.rows(res, configs, outs)
	task.Done(summary(res))
	return res, nil
}

// runOn is one run (the warm-up, or one configuration of one repetition)
// on a server of its own, closed after it: an embedded server starts on a
// fresh store in a fresh directory, so that no run pays for the store the
// runs before it left (a larger store, flushes and compactions still
// due), whichever configuration it measures; with --addr it is a new
// connection to that server, whose store the runs share.
func (g *Experiment) runOn(ctx context.Context, env *bench.Env, n int, d time.Duration) (*outcome, error) {
	t, err := bench.StartTarget(ctx, env.Addr, bench.TargetConfig{ClientOptions: env.ClientOptions})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	if err := t.EnsureSchema(ctx, bench.ItemSchema()); err != nil {
		return nil, err
	}
	o, err := g.run(ctx, t, n, d)
	if err != nil {
		return nil, err
	}
	o.sync, o.embedded = t.Sync, t.Embedded
	if t.Embedded {
		st, err := t.Stats(ctx)
		if err != nil {
			return nil, err
		}
		g.applied.Add(int64(st.Records))
	}
	return o, nil
}

// storeNote says on which store the runs ran.
func storeNote(embedded bool) string {
	if embedded {
		return "each run (and the warm-up) on an embedded server of its own, on a fresh store, so that no run inherits the flushes and compactions of the one before"
	}
	return "every run on the --addr server's one store: a run may inherit flushes and compactions due to the runs before it (the configurations trade places to spread that)"
}

// runOrder is the order of the configurations in repetition run: none and
// one watcher swap places every other repetition, so that a drift in the
// machine's speed does not always favour the same side of their ratio.
func runOrder(n, run int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if run%2 == 1 && n > 1 {
		order[0], order[1] = 1, 0
	}
	return order
}

// rows adds the result's rows: ingest by watchers, the one-watcher
// ratio, then per watcher count its delivery rate and latencies.
func (g *Experiment) rows(res *bench.Result, configs []int, outs [][]*outcome) {
	ingest := make([][]float64, len(configs))
	for i, n := range configs {
		for _, o := range outs[i] {
			ingest[i] = append(ingest[i], o.ingestRate())
		}
		res.Rows = append(res.Rows, bench.NewRow(fmt.Sprintf("ingest watchers=%d", n),
			map[string]any{"watchers": n, "batch": g.Batch}, "records/s", ingest[i], nil))
	}
	if len(configs) > 1 && configs[1] == 1 {
		ratio := make([]float64, len(ingest[0]))
		for r := range ratio {
			ratio[r] = ingest[1][r] / ingest[0][r]
		}
		res.Rows = append(res.Rows, bench.NewRow("ingest with 1 watcher / with none",
			map[string]any{"watchers": 1, "batch": g.Batch}, "× rate without watchers", ratio, nil))
	}
	for i, n := range configs {
		if n == 0 {
			continue
		}
		var delivered []float64
		var p50, p99, pmax []float64
		for _, o := range outs[i] {
			delivered = append(delivered, median(o.delivered))
			p50 = append(p50, o.lat.quantile(0.50))
			p99 = append(p99, o.lat.quantile(0.99))
			pmax = append(pmax, o.lat.quantile(1))
		}
		res.Rows = append(res.Rows, bench.NewRow(fmt.Sprintf("delivered per watcher, watchers=%d", n),
			map[string]any{"watchers": n, "batch": g.Batch}, "changes/s", delivered, nil))
		// The median gets a unit of its own: it is often within a
		// millisecond of 0, even below, and the chart and the report's
		// answer are about the tail.
		for _, q := range []struct {
			name, unit string
			v          []float64
		}{{"p50", "ms, p50", p50}, {"p99", "ms", p99}, {"max", "ms", pmax}} {
			res.Rows = append(res.Rows, bench.NewRow(fmt.Sprintf("latency %s watchers=%d", q.name, n),
				map[string]any{"watchers": n, "batch": g.Batch, "percentile": q.name}, q.unit, q.v, nil))
		}
	}
}

// median is the median of xs (0 for none).
func median(xs []float64) float64 { return bench.Summarize(xs).Median }

// summary is the progress line's note: the first watcher count's p99.
func summary(res *bench.Result) string {
	for _, r := range res.Rows {
		if r.Unit == "ms" && r.Params["percentile"] == "p99" {
			return fmt.Sprintf("%s: %.3g ms", r.Name, r.Median)
		}
	}
	return "done"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
