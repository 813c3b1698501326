// Package oneop is the lab's one-operation-at-a-time experiment: N client
// goroutines, each issuing one operation per round trip through the Go
// client as most applications do, rather than the batches the other
// experiments send. It reports throughput and latency percentiles for
// reads, durable writes and a mix, beside the ceilings of the same round
// trip on the same server (a unary health check, Lab.Echo at batch 1).
package oneop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/bench"
)

func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }

// Experiment measures, with Clients goroutines on one embedded server
// (or the --addr one) holding Records items: Get of one record by key,
// one-query Search on a stream per goroutine, durable inserts of one
// record per acknowledged write on a Write stream per goroutine, a 50/50
// mix of Gets and inserts, a unary health check and Lab.Echo at batch 1.
// With Postgres (a DSN), PostgreSQL's primary-key SELECT and single-row
// INSERT run beside them from as many connections. The rows alternate
// within each round, so that ratios of two rows taken per round see the
// same moment of the machine.
type Experiment struct {
	Clients  int
	Records  int
	Postgres string
	// RequestsDir, when set, receives the get, query and health rows'
	// requests encoded for an independent load generator (writeRequests).
	RequestsDir string
}

// Name implements bench.Experiment.
func (*Experiment) Name() string { return "oneop" }

// Describe implements bench.Experiment.
func (*Experiment) Describe() string {
	return "one operation per round trip from N goroutines: reads, durable writes, a 50/50 mix, and their ceilings (throughput, p50/p99/p999)"
}

// Flags implements bench.Experiment.
func (x *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&x.Clients, "clients", 16, "client goroutines, each issuing one operation at a time (at most 1000)")
	fs.IntVar(&x.Records, "records", 0, "records preloaded for the reads (0: 100000, 10000 with --quick)")
	fs.StringVar(&x.RequestsDir, "requests-dir", "", "also write DIR/get.bin, DIR/query.bin and DIR/health.bin: 1,000 unary Get and Query requests of loaded records by key, and a health check, length-prefixed for ghz --binary-file (docs/benchmarks.md)")
	fs.StringVar(&x.Postgres, "postgres", "", "also run PostgreSQL's primary-key SELECT and single-row INSERT on this server (a connection URL or DSN; scripts/postgres-bench starts one), in a table protobase_oneop_items it creates and drops")
}

// maxClients bounds --clients: each client holds a latency histogram
// (58 KiB) and, with --postgres, a PostgreSQL connection.
const maxClients = 1000

func (x *Experiment) defaults(quick bool) error {
	if x.Records == 0 {
		x.Records = 100000
		if quick {
			x.Records = 10000
		}
	}
	switch {
	case x.Records < 1:
		return fmt.Errorf("--records must be at least 1, got %d", x.Records)
	case x.Clients < 1 || x.Clients > maxClients:
		return fmt.Errorf("--clients must be in 1..%d, got %d", maxClients, x.Clients)
	}
	return nil
}

// row is one measured operation: its name and its loop.
type row struct {
	name string
	loop *loop
}

// Run implements bench.Experiment.
func (x *Experiment) Run(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	if err := x.defaults(env.Quick); err != nil {
		return nil, err
	}
	t, err := env.Target(ctx, bench.TargetConfig{})
	if err != nil {
		return nil, err
	}
	if err := t.LoadItems(ctx, env.Progress, x.Records); err != nil {
		return nil, err
	}
	if x.RequestsDir != "" {
		if err := writeRequests(x.RequestsDir, x.Records); err != nil {
			return nil, err
		}
	}
	compacted, err := t.CompactLoaded(ctx, env.Progress)
	if err != nil {
		return nil, err
	}
	before, err := t.Stats(ctx)
	if err != nil {
		return nil, err
	}
	// New records take ids above the loaded ones; an --addr server may
	// hold those of an earlier run, so there they start at a random
	// offset far above (a collision fails the insert, and the run).
	next := new(ids)
	next.next.Store(int64(x.Records))
	if !t.Embedded {
		next.next.Store(int64(x.Records) + 1<<40 + rand.Int64N(1<<60))
	}
	var written atomic.Uint64
	hists := make([]bench.LatencyHist, x.Clients)
	rows := x.protobaseRows(t, hists, next, &written)
	var pg *postgres
	if x.Postgres != "" {
		if pg, err = openPostgres(ctx, x.Postgres, x.Clients, x.Records); err != nil {
			return nil, err
		}
		defer func() { _ = pg.close(context.WithoutCancel(ctx)) }() // the table goes either way
		rows = withPostgres(rows, pg, hists, x.Records)
	}
	samples, err := measure(ctx, env, rows)
	if err != nil {
		return nil, err
	}
	after, err := t.Stats(ctx)
	if err != nil {
		return nil, err
	}
	// Every acknowledged insert must have been written; on an --addr
	// server other clients may add to the counter, never take away.
	if got := after.Records - before.Records; got < written.Load() || (t.Embedded && got != written.Load()) {
		return nil, fmt.Errorf("server wrote %d records for %d acknowledged inserts", got, written.Load())
	}
	res := x.result(env, rows, samples)
	res.Notes = append(res.Notes, x.notes(t, compacted, written.Load())...)
	res.Notes = append(res.Notes,
		ratioNote("get", "health", samples, rows),
		ratioNote("query", "health", samples, rows),
		ratioNote("search", "echo", samples, rows))
	if pg != nil {
		if err := pg.check(ctx, x.Records); err != nil {
			return nil, err
		}
		res.Notes = append(res.Notes, pgNotes(pg, x.Clients)...)
		res.Notes = append(res.Notes,
			ratioNote("get", pgSelect, samples, rows),
			ratioNote("search", pgSelect, samples, rows),
			ratioNote("write", pgInsert, samples, rows))
	}
	return res, nil
}

// protobaseRows are the Protobase rows and their ceilings, each read
// beside its ceiling.
func (x *Experiment) protobaseRows(t *bench.Target, hists []bench.LatencyHist, next *ids, written *atomic.Uint64) []row {
	c := t.Client
	return []row{
		{"get", newLoop(hists, openGet(c, x.Records))},
		{"health", newLoop(hists, openHealth(c))},
		{"query", newLoop(hists, openQuery(c, x.Records))},
		{"search", newLoop(hists, openSearch(c, x.Records))},
		{"echo", newLoop(hists, openEcho(t, x.Records))},
		{"write", newLoop(hists, openWrite(c, next, written))},
		{"write shared", newLoop(hists, (&sharedWriter{c: c, next: next, written: written}).open)},
		{"mix", newLoop(hists, openMix(c, x.Records, next, written))},
	}
}

// Names of the PostgreSQL rows.
const (
	pgSelect = "postgres select"
	pgInsert = "postgres insert"
)

// withPostgres puts PostgreSQL's select after get and its insert after
// write, so that each follows the row it is compared with. Its inserts
// take ids from a counter of their own, above the loaded rows.
func withPostgres(rows []row, pg *postgres, hists []bench.LatencyHist, records int) []row {
	next := new(ids)
	next.next.Store(int64(records))
	var out []row
	for _, r := range rows {
		out = append(out, r)
		switch r.name {
		case "get":
			out = append(out, row{pgSelect, newLoop(hists, pg.openSelect(records))})
		case "write":
			out = append(out, row{pgInsert, newLoop(hists, pg.openInsert(next))})
		}
	}
	return out
}

func pgNotes(pg *postgres, clients int) []string {
	notes := []string{fmt.Sprintf("postgres rows: %s, %d connections, one per goroutine, on a table of the items' five fields (id bigint primary key; about 100 bytes a row), as many rows preloaded; "+
		"select: SELECT of one row by primary key (a prepared statement); insert: a single-row INSERT in its own transaction, synchronous_commit on; %d rows inserted",
		pg.where, clients, pg.written.Load())}
	if pg.fsync != "on" {
		notes = append(notes, fmt.Sprintf("⚠ PostgreSQL runs with fsync %s: its inserts are not durable", pg.fsync))
	}
	return notes
}

// measure runs every row's loop, alternating within each round.
func measure(ctx context.Context, env *bench.Env, rows []row) ([]bench.Sample, error) {
	labels := make([]string, len(rows))
	ws := make([]bench.Workload, len(rows))
	for i, r := range rows {
		labels[i], ws[i] = r.name, r.loop.workload
	}
	return env.MeasureAlternately(ctx, labels, ws)
}

// result builds the rows: throughput, then the latency percentiles.
func (x *Experiment) result(env *bench.Env, rows []row, samples []bench.Sample) *bench.Result {
	res := &bench.Result{Chart: &bench.Chart{
		Title: fmt.Sprintf("One operation per round trip, %d client goroutines", x.Clients), Kind: bench.Bars,
		XLabel: "operation", YLabel: "operations/s", X: "op", Unit: "operations/s", Better: bench.HigherBetter,
	}}
	for i, r := range rows {
		params := map[string]any{"op": r.name, "clients": x.Clients}
		res.Rows = append(res.Rows, bench.NewRow(r.name, params, "operations/s", samples[i].Ops, nil))
	}
	for _, r := range rows {
		lat := r.loop.last(env.Runs)
		for _, q := range []struct {
			name string
			v    []float64
		}{{"p50", lat.p50}, {"p99", lat.p99}, {"p999", lat.p999}} {
			params := map[string]any{"op": r.name, "clients": x.Clients, "percentile": q.name}
			res.Rows = append(res.Rows, bench.NewRow(r.name+" "+q.name, params, "µs, "+q.name, q.v, nil))
		}
	}
	return res
}

func (x *Experiment) notes(t *bench.Target, compacted bool, written uint64) []string {
	notes := []string{
		fmt.Sprintf("%d client goroutines on one connection, each issuing one operation and waiting for its answer before the next; %d records of about 100 bytes preloaded, read keys drawn uniformly", x.Clients, x.Records),
		"get: Client.Get of one key (unary); query: Client.Query of one record by a condition on its key (unary); search: one Search stream per goroutine, one query per request, its result read before the next; health: a unary gRPC health check; echo: one Lab.Echo stream per goroutine at batch 1 (answered without storage)",
		fmt.Sprintf("write: one Write stream per goroutine, each inserting one new record and waiting for its acknowledgement (Writer.Flush) before the next; write shared: the same through one Writer (one stream) shared by every goroutine; mix: Get or insert with even odds; %d records inserted and acknowledged in all", written),
		"latency rows: each operation's time from call to answer, all goroutines pooled (a log-linear histogram, within 0.8%), the median over runs",
	}
	if !t.Sync {
		notes = append(notes, "⚠ the server does not fsync before acknowledging (--no-sync): the write rows are not durable writes")
	}
	if !compacted {
		notes = append(notes, "the --addr server's store was not compacted after loading: compaction may run through the measured runs")
	}
	return notes
}

// ratioNote states a row's share of its ceiling, per round.
func ratioNote(a, b string, samples []bench.Sample, rows []row) string {
	ia, ib := index(rows, a), index(rows, b)
	s := bench.Summarize(bench.Ratios(samples[ia].Ops, samples[ib].Ops))
	return fmt.Sprintf("%s ÷ %s: %.2f (%.2f–%.2f over %d rounds, each ratio of one round's runs)", a, b, s.Median, s.Min, s.Max, s.N)
}

func index(rows []row, name string) int {
	for i, r := range rows {
		if r.name == name {
			return i
		}
	}
	panic("oneop: no row " + name)
}
