package bench

import (
	"testing"
	"time"

	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
)

// tinyOptions are --quick with the shortest runs that still measure, to
// keep the end-to-end test cheap.
func tinyOptions() Options {
	o := QuickOptions()
	o.Runs, o.Duration, o.Warmup = 1, 30*time.Millisecond, 0
	return o
}

// Every registered experiment runs end to end in quick mode against real
// embedded servers and returns well-formed rows.
func TestExperimentsQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and measures")
	}
	for _, x := range Experiments() {
		t.Run(x.Name(), func(t *testing.T) {
			// Fewer configurations than --quick's, same code paths.
			switch x := x.(type) {
			case *Batching:
				x.Records, x.Batches = 2000, []int{1, 1000}
			case *Patterns:
				x.Records = 2000
			case *Ingest:
				x.Batches = []int{1, 100}
			case *Layout:
				x.Sizes = []string{"Tiny", "Small"}
			case *Fetch:
				x.Users = []int{3000}
			}
			res, err := Run(t.Context(), x, tinyOptions(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Experiment != x.Name() || res.Machine.CPUs == 0 || res.Started.IsZero() || res.Chart == nil || len(res.Rows) == 0 {
				t.Fatalf("result %+v", res)
			}
			for _, r := range res.Rows {
				if r.Runs != 1 || r.Median <= 0 || r.Min > r.Median || r.Median > r.Max || r.Unit == "" {
					t.Errorf("row %+v", r)
				}
			}
			if err := Draw(res, t.TempDir()+"/c.png"); err != nil {
				t.Error(err)
			}
		})
	}
}

// runWith runs x on env without closing it, so that the test can read
// the embedded servers' engine counters afterwards.
func runWith(t *testing.T, x Experiment) (*Result, *Env) {
	t.Helper()
	env := NewEnv(tinyOptions(), nil)
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	res, err := x.Run(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	return res, env
}

// The batching experiment's lookup rows are real lookups: the server made
// exactly one point read per query the client had answered, and the
// transport rows made none.
func TestBatchingLooksUpEveryQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	b := &Batching{Records: 1000, Batches: []int{1, 100}}
	_, env := runWith(t, b)
	st := mustStats(t, env.targets[0])
	if b.ctr.queries == 0 || st.PointLookups != b.ctr.queries || st.Queries != b.ctr.queries {
		t.Fatalf("client had %d lookups answered; server made %d point lookups for %d queries",
			b.ctr.queries, st.PointLookups, st.Queries)
	}
}

// The no-response patterns send nothing back: the sink answers once per
// stream (its summary) however many queries it ran, and a Write stream
// without acknowledgements delivers no message at all; the server still
// did all the work.
func TestNoResponseSendsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	ctx := t.Context()
	env := NewEnv(tinyOptions(), nil)
	t.Cleanup(func() { _ = env.Close() })
	tg, err := env.Target(ctx, TargetConfig{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.EnsureSchema(ctx, labSchema); err != nil {
		t.Fatal(err)
	}
	if err := loadItems(ctx, env, tg, 500); err != nil {
		t.Fatal(err)
	}

	frames, err := searchFrames(10, 500)
	if err != nil {
		t.Fatal(err)
	}
	var ctr searchCounter
	queries0 := mustStats(t, tg).PointLookups
	c, err := sinkSearch(tg.Lab, frames, 10, searchCheck{records: 1}, &ctr)(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if ctr.responses != 1 || ctr.queries != uint64(c.Ops) || c.Ops < 10 {
		t.Fatalf("sink: %d messages received for %d queries", ctr.responses, c.Ops)
	}
	if got := mustStats(t, tg).PointLookups - queries0; got != uint64(c.Ops) {
		t.Fatalf("sink: server made %d lookups for %d queries", got, c.Ops)
	}

	p := new(Patterns)
	wframes, err := writeFrames(10, false)
	if err != nil {
		t.Fatal(err)
	}
	records0 := mustStats(t, tg).Records
	c, err = p.writeWorkload(tg, patNoResponse, wframes, 10)(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if p.writes.acks != 0 || p.writes.noResp != 0 || c.Ops < 10 {
		t.Fatalf("no-response writes: %d acknowledgements, %d other messages for %d records", p.writes.acks, p.writes.noResp, c.Ops)
	}
	if got := mustStats(t, tg).Records - records0; got != uint64(c.Ops) {
		t.Fatalf("server wrote %d records, %d sent", got, c.Ops)
	}

	// And the alternate pattern does get an acknowledgement per batch.
	aframes, err := writeFrames(10, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err = p.writeWorkload(tg, patAlternate, aframes, 10)(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if p.writes.acks*10 != uint64(c.Ops) {
		t.Fatalf("alternate: %d acknowledgements for %d records", p.writes.acks, c.Ops)
	}
}

// mustStats returns the engine counters of tg's server, through the lab API.
func mustStats(t *testing.T, tg *Target) *labv1.StatsResponse {
	t.Helper()
	st, err := tg.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
