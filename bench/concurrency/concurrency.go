// Package concurrency is the lab's concurrency-control experiment: what
// conditional writes, patches, contended counters and optimistic
// transactions cost beside the plain writes they replace, each pair
// measured in one run on one server.
package concurrency

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/server"
)

func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }

// Experiment measures, on a syncing embedded server (and one on the etcd
// cluster of --etcd): updates of batches of YCSB-shaped rows with and
// without a version condition on every record; patches of one field of
// ten against full updates; clients adding to one counter at once; and
// transactions of two reads and two writes against the same two writes
// sent unconditionally.
type Experiment struct {
	Batch   int
	Streams int
	Clients int
}

// Name implements bench.Experiment.
func (*Experiment) Name() string { return "concurrency" }

// Describe implements bench.Experiment.
func (*Experiment) Describe() string {
	return "conditional vs plain updates, patches vs full updates, contended counters, transactions vs plain writes"
}

// Flags implements bench.Experiment.
func (g *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&g.Batch, "batch", 1000, "records per update batch")
	fs.IntVar(&g.Streams, "streams", 4, "write streams updating rows at once, each its own rows")
	fs.IntVar(&g.Clients, "clients", 16, "clients adding to one counter, and running transactions, at once")
}

// Run implements bench.Experiment.
func (g *Experiment) Run(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	if err := bench.CheckBatches([]int{g.Batch}); err != nil {
		return nil, err
	}
	if g.Streams < 1 || g.Clients < 1 {
		return nil, fmt.Errorf("--streams %d --clients %d: want at least 1 each", g.Streams, g.Clients)
	}
	res := &bench.Result{Chart: &bench.Chart{
		Title: "Concurrency control: each path beside the plain writes it replaces", Kind: bench.Bars,
		XLabel: "workload", YLabel: "operations/s", X: "workload", Series: "store", Unit: "records/s",
	}}
	cfgs := []bench.TargetConfig{{}}
	if env.Addr == "" && len(env.Etcd.Endpoints) > 0 {
		cfgs = append(cfgs, bench.TargetConfig{Etcd: env.Etcd})
	}
	for _, cfg := range cfgs {
		t, err := env.Target(ctx, cfg)
		if err != nil {
			return nil, err
		}
		if err := t.EnsureSchema(ctx, schema()); err != nil {
			return nil, err
		}
		store := t.Store
		if store == "" {
			store = server.StorePebble
		}
		if err := g.measureTarget(ctx, env, t, store, res); err != nil {
			return nil, err
		}
	}
	res.Notes = append(res.Notes,
		fmt.Sprintf("updates: %d streams, each updating its own rows in batches of %d, one batch in flight per stream; rows of ten 100-byte fields", g.Streams, g.Batch),
		"conditional: every record of a batch carries a version condition (the version its last update acknowledged)",
		"patch: one field of ten (WRITE_OP_PATCH, fields f3) against an update of the whole row",
		fmt.Sprintf("counter: %d clients each sending single-record patches that add 1 to one counter, each waiting for its acknowledgement; counter update: the same clients updating that record whole instead, the adds' ceiling", g.Clients),
		fmt.Sprintf("transactions: %d clients, each transaction reads two random rows of the %d and writes both (low contention); 2 writes: the same clients sending the two writes as one batch, without reads or conditions", g.Clients, g.Streams*batchesPerStream*g.Batch))
	return res, nil
}

// measureTarget runs every pair on t, adding rows to res.
func (g *Experiment) measureTarget(ctx context.Context, env *bench.Env, t *bench.Target, store string, res *bench.Result) error {
	u, err := g.loadRows(ctx, t)
	if err != nil {
		return err
	}
	ctr, err := newCounter(ctx, t)
	if err != nil {
		return err
	}
	set, err := newCounter(ctx, t)
	if err != nil {
		return err
	}
	ws := []named{
		{"update", "records/s", u.workload(updateFull, false)},
		{"update conditional", "records/s", u.workload(updateFull, true)},
		{"patch 1 of 10 fields", "records/s", u.workload(updatePatch, false)},
		{"counter add", "increments/s", g.counter(t, ctr, false)},
		{"counter update", "updates/s", g.counter(t, set, true)},
	}
	ws = append(ws, g.transactions(u)...)
	for _, w := range ws {
		label := fmt.Sprintf("%s store=%s", w.name, store)
		s, err := env.Measure(ctx, label, w.w)
		if err != nil {
			return err
		}
		params := map[string]any{"workload": w.name, "store": store, "batch": g.Batch}
		res.Rows = append(res.Rows, bench.NewRow(label, params, w.unit, s.Ops, nil))
	}
	return ctr.check(ctx, t)
}

// named is a workload with its row's name and unit.
type named struct {
	name, unit string
	w          bench.Workload
}
