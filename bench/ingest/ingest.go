// Package ingest is the lab's ingest experiment: durable batched insert
// throughput by batch size, with and without secondary indexes.
package ingest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/server"
)

func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }

// Experiment measures batched inserts through the Write stream (op
// INSERT), by records per request, with no and with two secondary
// indexes, on a server that fsyncs before acknowledging and on one that
// does not (separate embedded servers; an --addr server runs only its own
// mode). A run ends when the stream's final status arrives, which for a
// durable server means every record is on disk (the status is OK only
// then). It reports records/s and MB/s of record bytes.
type Experiment struct {
	Batches []int
	// Sustain, when positive, adds one long run per index count on a fresh
	// syncing server at the largest batch size (see sustain.go), before
	// the batch runs.
	Sustain time.Duration
	// Streams is how many Write streams insert at once, each its own
	// records (0: one).
	Streams int

	// nextID hands out ids so that no two inserts collide, across runs and
	// configurations.
	nextID atomic.Int64
	// written counts what was inserted into each target, which its
	// server's counters must match (checked by the tests).
	written map[*bench.Target]*bench.WriteCounter
	// peer is the second server on the etcd cluster and bare the two bare
	// etcd clients of the bare rows (etcdbare.go), started at the first
	// batch size measured on etcd.
	peer *bench.Target
	bare []*bench.BareEtcd
}

// Name implements bench.Experiment.
func (*Experiment) Name() string { return "ingest" }

// Describe implements bench.Experiment.
func (*Experiment) Describe() string {
	return "durable batched inserts by batch size, with 0 and 2 secondary indexes, fsync on and off"
}

// Flags implements bench.Experiment.
func (g *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntSliceVar(&g.Batches, "batches", nil, "records per request (default 1,10,100,1000,10000; 1,100,10000 with --quick)")
	fs.IntVar(&g.Streams, "streams", 1, "write streams inserting at once, each its own records (on etcd each stream keeps a transaction in flight)")
	fs.DurationVar(&g.Sustain, "sustain", 0, "also run durable ingest this long on a fresh server (e.g. 15s) and report its rate in the first second, the last second and overall")
}

// Run implements bench.Experiment.
func (g *Experiment) Run(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	if len(g.Batches) == 0 {
		g.Batches = []int{1, 10, 100, 1000, 10000}
		if env.Quick {
			g.Batches = []int{1, 100, 10000}
		}
	}
	if err := bench.CheckBatches(g.Batches); err != nil {
		return nil, err
	}
	if g.Streams < 0 {
		return nil, fmt.Errorf("--streams %d: want at least 1", g.Streams)
	}
	if g.Sustain < 0 || (g.Sustain > 0 && g.Sustain < minSustain) {
		return nil, fmt.Errorf("--sustain %s: want 0 (none) or at least %s", g.Sustain, minSustain)
	}
	// Ids start at the clock so that runs against one --addr server never
	// insert an id an earlier run stored.
	g.nextID.Store(time.Now().UnixNano() / 1000)
	g.written = map[*bench.Target]*bench.WriteCounter{}
	defer func() { _ = g.closeBare() }() // on an error; closed below otherwise
	res := &bench.Result{Chart: &bench.Chart{
		Title: "Batched inserts (Write stream, op INSERT)", Kind: bench.Lines,
		XLabel: "records per request", YLabel: "records/s", X: "batch", Series: "config", Unit: "records/s", LogX: true, LogY: true,
	}}
	// The sustained runs go first, before the batch runs' servers exist:
	// those stay open until the experiment ends, and their flushes and
	// compactions after the batch runs took CPU from the first seconds of
	// the sustained runs that followed them.
	sustained := new(bench.Result)
	if g.Sustain > 0 {
		if err := g.sustain(ctx, env, sustained); err != nil {
			return nil, err
		}
	}
	targets, err := g.targets(ctx, env, res)
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		if err := t.EnsureSchema(ctx, bench.ItemSchema()); err != nil {
			return nil, err
		}
		for _, indexes := range []int{0, 2} {
			typ := bench.ItemType
			if indexes == 2 {
				typ = bench.IndexedItemType
			}
			config := fmt.Sprintf("indexes=%d sync=%v", indexes, onOff(t.Sync))
			if t.Store == server.StoreEtcd {
				config = fmt.Sprintf("indexes=%d store=etcd", indexes)
			}
			if g.Streams > 1 {
				config += fmt.Sprintf(" streams=%d", g.Streams)
			}
			for _, batch := range g.Batches {
				label := fmt.Sprintf("%s batch=%d", config, batch)
				params := map[string]any{"batch": batch, "indexes": indexes, "sync": t.Sync, "config": config, "store": t.Store}
				if t.Store == server.StoreEtcd && indexes == 0 {
					if err := g.etcdRows(ctx, env, t, label, params, batch, res); err != nil {
						return nil, err
					}
					continue
				}
				s, err := env.Measure(ctx, label, g.workload(t, typ, batch))
				if err != nil {
					return nil, err
				}
				addRows(res, label, params, s)
			}
		}
	}
	if err := g.closeBare(); err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, sustained.Rows...)
	res.Notes = append(res.Notes, "records of about 100 bytes; MB/s counts record bytes (10^6 bytes), not protocol overhead")
	return res, nil
}

// targets starts the servers of the batch runs: the --addr server, or
// embedded ones that fsync and that do not (and one on the etcd cluster of
// --etcd), noting on res what an --addr or etcd target means.
func (g *Experiment) targets(ctx context.Context, env *bench.Env, res *bench.Result) ([]*bench.Target, error) {
	var targets []*bench.Target
	if env.Addr != "" {
		t, err := env.Target(ctx, bench.TargetConfig{})
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
		res.Notes = append(res.Notes, fmt.Sprintf("--addr: only the server's own mode (sync=%v) was measured", t.Sync))
	} else {
		for _, noSync := range []bool{false, true} {
			t, err := env.Target(ctx, bench.TargetConfig{NoSync: noSync})
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
		}
		if len(env.Etcd.Endpoints) > 0 {
			t, err := env.Target(ctx, bench.TargetConfig{Etcd: env.Etcd})
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
			res.Notes = append(res.Notes, fmt.Sprintf("store=etcd rows: an embedded server whose store is the etcd cluster %v; a batch is acknowledged once a quorum of members fsynced it", env.Etcd.Endpoints))
		}
	}
	return targets, nil
}

// addRows adds the records/s and MB/s rows of s.
func addRows(res *bench.Result, label string, params map[string]any, s bench.Sample) {
	res.Rows = append(res.Rows, bench.NewRow(label, params, "records/s", s.Ops, nil))
	mb := make([]float64, len(s.Bytes))
	for i, v := range s.Bytes {
		mb[i] = v / 1e6
	}
	res.Rows = append(res.Rows, bench.NewRow(label, params, "MB/s", mb, nil))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// workload inserts batches of fresh items for d through g.Streams Write
// streams at once (see bench.InsertStream), counting them in g.written[t].
func (g *Experiment) workload(t *bench.Target, typ string, batch int) bench.Workload {
	ctr := g.written[t]
	if ctr == nil {
		ctr = new(bench.WriteCounter)
		g.written[t] = ctr
	}
	stream := func(c *bench.WriteCounter) bench.Workload {
		return bench.InsertStream(t, batch, bench.ItemWireBytes, func(buf []byte) ([]byte, int64) {
			first := g.nextID.Add(int64(batch)) - int64(batch)
			return bench.AppendWriteRecords(buf, 2, typ, first, batch)
		}, nil, c)
	}
	if g.Streams <= 1 {
		return stream(ctr)
	}
	return func(ctx context.Context, d time.Duration) (bench.Count, error) {
		counts := make([]bench.Count, g.Streams)
		ctrs := make([]bench.WriteCounter, g.Streams)
		errs := make([]error, g.Streams)
		var wg sync.WaitGroup
		for i := range g.Streams {
			wg.Go(func() { counts[i], errs[i] = stream(&ctrs[i])(ctx, d) })
		}
		wg.Wait()
		var sum bench.Count
		for i, c := range counts {
			if errs[i] != nil {
				return bench.Count{}, fmt.Errorf("stream %d: %w", i, errs[i])
			}
			sum.Ops += c.Ops
			sum.Bytes += c.Bytes
			sum.Elapsed = max(sum.Elapsed, c.Elapsed)
			ctr.Records += ctrs[i].Records
			ctr.Batches += ctrs[i].Batches
		}
		return sum, nil
	}
}
