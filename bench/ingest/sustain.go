package ingest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/protobase/protobase/bench"
)

// minSustain is the shortest --sustain: a first and a last second apart.
const minSustain = 2 * time.Second

// sustain measures whether durable ingest keeps its pace once the
// memtables start flushing and compactions run: g.Sustain of inserts at
// the largest batch size on a fresh syncing server (with --addr, that
// server), env.Runs times per index count. Rates come from the
// acknowledgements (records durable, not merely sent): in the first
// second, in the last second and over the whole run, and the ratio of the
// whole run's to the first second's.
func (g *Experiment) sustain(ctx context.Context, env *bench.Env, res *bench.Result) error {
	batch := slices.Max(g.Batches)
	for _, indexes := range []int{0, 2} {
		typ := bench.ItemType
		if indexes == 2 {
			typ = bench.IndexedItemType
		}
		label := fmt.Sprintf("sustained %s indexes=%d sync=on batch=%d", g.Sustain, indexes, batch)
		task := env.Progress.Task(label, env.Runs)
		var first, last, whole, ratio []float64
		for run := 0; run < env.Runs; run++ {
			tr, err := g.sustainRun(ctx, env, typ, batch)
			if err != nil {
				task.Done("failed")
				return fmt.Errorf("%s: run %d: %w", label, run+1, err)
			}
			f, l, w := tr.rates()
			first, last, whole, ratio = append(first, f), append(last, l), append(whole, w), append(ratio, w/f)
			task.Step()
		}
		s := bench.Summarize(ratio)
		task.Done(fmt.Sprintf("overall %.2f of the first second", s.Median))
		params := map[string]any{"batch": batch, "indexes": indexes, "sync": true, "config": label}
		res.Rows = append(res.Rows,
			bench.NewRow(label, params, "records/s, first second", first, nil),
			bench.NewRow(label, params, "records/s, last second", last, nil),
			bench.NewRow(label, params, "records/s, overall", whole, nil),
			bench.NewRow(label, params, "overall / first second", ratio, nil))
	}
	return nil
}

// sustainRun is one sustained run on a server of its own, closed after it
// (its data directory with it).
func (g *Experiment) sustainRun(ctx context.Context, env *bench.Env, typ string, batch int) (*ackTrace, error) {
	t, err := bench.StartTarget(ctx, env.Addr, bench.TargetConfig{ClientOptions: env.ClientOptions})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	if !t.Sync {
		return nil, fmt.Errorf("the server at %s does not fsync writes (--sync=false): sustained ingest measures durable writes", t.Addr)
	}
	if err := t.EnsureSchema(ctx, bench.ItemSchema()); err != nil {
		return nil, err
	}
	tr := new(ackTrace)
	w := bench.InsertStreamAcked(t, batch, bench.ItemWireBytes, func(buf []byte) ([]byte, int64) {
		first := g.nextID.Add(int64(batch)) - int64(batch)
		return bench.AppendWriteRecords(buf, 2, typ, first, batch)
	}, nil, nil, tr.add)
	if _, err := w(ctx, g.Sustain); err != nil {
		return nil, err
	}
	return tr, nil
}

// ackTrace is the records acknowledged over a run, one point per
// acknowledgement, the last one at the run's end.
type ackTrace struct{ points []ackPoint }

type ackPoint struct {
	at      time.Duration
	records uint64
}

func (tr *ackTrace) add(at time.Duration, records uint64) {
	tr.points = append(tr.points, ackPoint{at, records})
}

// rates returns records/s in the first second (up to the last
// acknowledgement within it), in the last second (from the last
// acknowledgement a second or more before the end) and over the run.
func (tr *ackTrace) rates() (first, last, whole float64) {
	if len(tr.points) == 0 {
		return 0, 0, 0
	}
	end := tr.points[len(tr.points)-1]
	rate := func(a, b ackPoint) float64 {
		if b.at <= a.at {
			return 0
		}
		return float64(b.records-a.records) / (b.at - a.at).Seconds()
	}
	whole = rate(ackPoint{}, end)
	f, l := tr.points[0], ackPoint{}
	for _, p := range tr.points {
		if p.at <= time.Second {
			f = p
		}
		if p.at <= end.at-time.Second {
			l = p
		}
	}
	return rate(ackPoint{}, f), rate(l, end), whole
}
