// Package batching is the lab's batching experiment (seed 000): Search
// throughput on one stream, alternating send and receive, by queries per
// request.
package batching

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/bench"
)

func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }

// seed000 are seed 000's figures: alternating Search on one stream,
// op/s by batch size.
var seed000 = map[int]float64{1: 9482, 10: 85479, 100: 622246, 1000: 1939291}

const seed000Source = "seed 000 (gRPC throughput: effects of batching; i7-13700H, localhost)"

// Experiment is seed 000: Search on one bidirectional stream, alternating
// send and receive, by queries per request. Each query is a primary-key
// lookup over a preloaded data set ("lookup" rows); the "transport" rows
// send the same requests to Lab.Echo, which answers without touching
// storage, so the gap between the two is what storage and the engine add
// to what gRPC costs; the "raw" rows send them to a bare grpc-go server
// answering with the same bytes (raw.go), so the gap between raw and
// transport is what Protobase's server adds to grpc-go itself.
type Experiment struct {
	Records       int
	Batches       []int
	TransportOnly bool

	// ctr counts the lookup queries answered, which the server's
	// point-lookup counter must match (see Run); echoes and raws count
	// the transport and raw rows' queries, which the server must not
	// count; etcdCtr counts the lookups of the server on etcd
	// (Options.Etcd).
	ctr, echoes, raws, etcdCtr bench.SearchCounter
	// peerCtr counts the lookups of the second server on etcd (the
	// servers=2 rows, etcdbare.go).
	peerCtr bench.SearchCounter
	// warmed is how many records warmRecords read.
	warmed int
}

// Name implements bench.Experiment.
func (*Experiment) Name() string { return "batching" }

// Describe implements bench.Experiment.
func (*Experiment) Describe() string {
	return "Search throughput by queries per request, alternating send and receive (seed 000)"
}

// Flags implements bench.Experiment.
func (b *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&b.Records, "records", 0, "records preloaded for the lookups (0: 100000, 10000 with --quick)")
	fs.IntSliceVar(&b.Batches, "batches", nil, "queries per request (default 1,10,100,1000,10000)")
	fs.BoolVar(&b.TransportOnly, "transport-only", false, "only the transport rows: the server answers without touching storage")
}

func (b *Experiment) defaults(quick bool) error {
	if b.Records == 0 {
		b.Records = 100000
		if quick {
			b.Records = 10000
		}
	}
	if len(b.Batches) == 0 {
		b.Batches = []int{1, 10, 100, 1000, 10000}
	}
	if b.Records < 1 {
		return fmt.Errorf("--records must be at least 1, got %d", b.Records)
	}
	return bench.CheckBatches(b.Batches)
}

// Run implements bench.Experiment.
func (b *Experiment) Run(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	if err := b.defaults(env.Quick); err != nil {
		return nil, err
	}
	t, err := env.Target(ctx, bench.TargetConfig{})
	if err != nil {
		return nil, err
	}
	res := &bench.Result{Chart: &bench.Chart{
		Title: "Search, alternating send/receive: throughput by batch size", Kind: bench.Lines,
		XLabel: "queries per request", YLabel: "queries/s", X: "batch", Series: "mode", LogX: true, LogY: true,
		Better: bench.HigherBetter,
	}}
	modes := []string{"raw", "transport", "lookup"}
	compacted := false
	if b.TransportOnly {
		modes = modes[:2]
	} else {
		if err := t.LoadItems(ctx, env.Progress, b.Records); err != nil {
			return nil, err
		}
		if compacted, err = t.CompactLoaded(ctx, env.Progress); err != nil {
			return nil, err
		}
	}
	raw, err := startRaw()
	if err != nil {
		return nil, err
	}
	defer raw.close()
	before, err := t.Stats(ctx)
	if err != nil {
		return nil, err
	}
	if !b.TransportOnly {
		if err := b.warmRecords(ctx, env, t); err != nil {
			return nil, err
		}
	}
	for _, batch := range b.Batches {
		if err := b.runBatch(ctx, env, t, raw, batch, modes, res); err != nil {
			return nil, err
		}
	}
	after, err := t.Stats(ctx)
	if err != nil {
		return nil, err
	}
	// Every lookup query must have been a point read on the server; on an
	// --addr server other clients may add to the counter, never take away.
	lookups := after.PointLookups - before.PointLookups
	if lookups < b.ctr.Queries || (t.Embedded && lookups != b.ctr.Queries) {
		return nil, fmt.Errorf("server made %d point lookups for %d lookup queries", lookups, b.ctr.Queries)
	}
	if !b.TransportOnly {
		res.Notes = append(res.Notes, fmt.Sprintf("lookup rows: %d records preloaded; the server made %d point lookups for %d queries answered", b.Records, lookups, b.ctr.Queries))
		if b.warmed >= b.Records {
			res.Notes = append(res.Notes, "lookup rows: every record was read once before the runs, so that the caches hold what they would after a long run")
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("lookup rows: %d of the %d records were read once before the runs (at most %s of reading): the caches may still be filling", b.warmed, b.Records, warmLimit))
		}
		if compacted {
			res.Notes = append(res.Notes, "lookup rows: the store was compacted after loading, before the warm-up, so the runs measure the steady state (no compaction running)")
		} else {
			res.Notes = append(res.Notes, "lookup rows: the --addr server's store was not compacted after loading: compaction may run through the measured runs")
		}
	}
	res.Notes = append(res.Notes, "transport rows: Lab.Echo answers each query with a canned 100-byte record without touching storage",
		"raw rows: the same answer bytes from a bare grpc-go server in the lab's process (one method registered by hand, a pass-through codec, no interceptors)")
	if len(env.Etcd.Endpoints) > 0 && env.Addr == "" && !b.TransportOnly {
		if err := b.runEtcd(ctx, env, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// warmLimit bounds warmRecords: a store of tens of millions of records
// read at the rate of one that misses the caches would take minutes.
const warmLimit = 60 * time.Second

// warmRecords reads every loaded record once, in requests of 1,000
// lookups, for at most warmLimit. Each run of a row starts again at the
// row's first requests, and a warm-up as short as --warmup reads a few
// of them: over millions of records the runs would measure the caches
// filling (lookups over 4 M records at a fifth to a half of the rate over
// 100,000) rather than lookups in the steady state, where the record
// cache holds what it can and the block cache the rest.
func (b *Experiment) warmRecords(ctx context.Context, env *bench.Env, t *bench.Target) error {
	const batch = 1000
	frames, err := bench.SearchFrames(batch, b.Records)
	if err != nil {
		return err
	}
	var p bench.Progress = bench.NoProgress{}
	if env.Progress != nil {
		p = env.Progress
	}
	task := p.Task(fmt.Sprintf("read the %d records once", b.Records), len(frames))
	defer task.Done("")
	start, next := time.Now(), 0
	for next < len(frames) && time.Since(start) < warmLimit {
		// The workload starts at its first frame: give it those not read yet.
		w := bench.AlternateSearch(bench.OpenSearch(t.API.Search), frames[next:], batch, bench.SearchCheck{Records: 1}, &b.ctr)
		c, err := w(ctx, 100*time.Millisecond)
		if err != nil {
			return fmt.Errorf("read the records once: %w", err)
		}
		read := int(c.Ops) / batch
		for range min(read, len(frames)-next) {
			task.Step()
		}
		next += read
	}
	b.warmed = min(next, len(frames)) * batch
	return nil
}

// runBatch measures every mode at one batch size, one after the other,
// so that their ratios compare runs made under the same conditions.
func (b *Experiment) runBatch(ctx context.Context, env *bench.Env, t *bench.Target, raw *rawServer, batch int, modes []string, res *bench.Result) error {
	frames, err := bench.SearchFrames(batch, b.Records)
	if err != nil {
		return err
	}
	ops := map[string]float64{}
	for _, mode := range modes {
		open, ctr := bench.OpenSearch(t.API.Search), &b.ctr
		switch mode {
		case "transport":
			open, ctr = t.Lab.Echo, &b.echoes // echoes are not lookups
		case "raw":
			open, ctr = raw.open, &b.raws
		}
		label := fmt.Sprintf("%s batch=%d", mode, batch)
		s, err := env.Measure(ctx, label, bench.AlternateSearch(open, frames, batch, bench.SearchCheck{Records: 1}, ctr))
		if err != nil {
			return err
		}
		ops[mode] = bench.Summarize(s.Ops).Median
		var ref *bench.Reference
		if v, ok := seed000[batch]; ok {
			ref = &bench.Reference{Value: v, Source: seed000Source}
		}
		res.Rows = append(res.Rows, bench.NewRow(label, map[string]any{"mode": mode, "batch": batch}, "queries/s", s.Ops, ref))
	}
	note := fmt.Sprintf("batch=%d: transport %.2f of raw", batch, ops["transport"]/ops["raw"])
	if !b.TransportOnly {
		note += fmt.Sprintf(", lookup %.2f of transport", ops["lookup"]/ops["transport"])
	}
	note += " (medians)"
	if share := ops["transport"] / ops["raw"]; share >= 1.005 { // prints as 1.01 or more
		// Protobase's server wraps the bare one, so it cannot be
		// faster: a share above 1 is the runs' noise, not a result.
		note += fmt.Sprintf("; ⚠ transport above raw (%.2f > 1) is noise: the server wraps the bare grpc-go one and cannot beat it", share)
	}
	res.Notes = append(res.Notes, note)
	return nil
}

// runEtcd adds the "lookup etcd" rows: the same lookups, in the same run,
// against an embedded server whose store is the --etcd-endpoints cluster,
// each batch size followed by its rows of a bare etcd client and of two
// servers and two bare clients at once (etcdbare.go).
func (b *Experiment) runEtcd(ctx context.Context, env *bench.Env, res *bench.Result) error {
	t, err := env.Target(ctx, bench.TargetConfig{Etcd: env.Etcd})
	if err != nil {
		return err
	}
	if err := t.LoadItems(ctx, env.Progress, b.Records); err != nil {
		return err
	}
	peers, err := b.startPeers(ctx, env, t)
	if err != nil {
		return err
	}
	defer func() { _ = peers.close() }() // on an error; closed below otherwise
	peer := peers.peer
	before, err := t.Stats(ctx)
	if err != nil {
		return err
	}
	peerBefore, err := peer.Stats(ctx)
	if err != nil {
		return err
	}
	for _, batch := range b.Batches {
		frames, err := bench.SearchFrames(batch, b.Records)
		if err != nil {
			return err
		}
		if err := b.etcdRows(ctx, env, t, peers, frames, batch, res); err != nil {
			return err
		}
	}
	if err := peers.close(); err != nil {
		return err
	}
	after, err := t.Stats(ctx)
	if err != nil {
		return err
	}
	if lookups := after.PointLookups - before.PointLookups; lookups != b.etcdCtr.Queries {
		return fmt.Errorf("server on etcd made %d point lookups for %d lookup queries", lookups, b.etcdCtr.Queries)
	}
	peerAfter, err := peer.Stats(ctx)
	if err != nil {
		return err
	}
	if lookups := peerAfter.PointLookups - peerBefore.PointLookups; lookups != b.peerCtr.Queries {
		return fmt.Errorf("second server on etcd made %d point lookups for %d lookup queries", lookups, b.peerCtr.Queries)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("lookup etcd rows: the same lookups against a server whose store is the etcd cluster %v (each lookup a linearizable read of the cluster)", env.Etcd.Endpoints), bareNote)
	return nil
}
