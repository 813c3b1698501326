package patterns

import (
	"fmt"
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
)

// The quick run measures every pattern for both APIs and batch sizes, and
// the servers did what the client counted: on the search server one point
// lookup per query answered (or run by the sink) and no write beyond the
// preload; on the write server every record sent, with acknowledgements
// only where a pattern asks for them.
func TestQuickRunMatchesServerCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and measures")
	}
	p := &Experiment{Records: 2000}
	res, env := labtest.Run(t, p)
	labtest.CheckResult(t, p, res)
	names := map[string]bool{}
	for _, r := range res.Rows {
		names[r.Name] = true
	}
	for _, api := range []string{"search", "write"} {
		for _, batch := range p.Batches {
			for _, pat := range []string{patAlternate, patSendAll, patNoResponse} {
				if name := fmt.Sprintf("%s %s batch=%d", api, pat, batch); !names[name] {
					t.Errorf("no row %q", name)
				}
			}
		}
	}
	if len(res.Rows) != 2*len(p.Batches)*3 {
		t.Errorf("%d rows", len(res.Rows))
	}
	tgs := env.Targets()
	if len(tgs) != 2 || !tgs[0].Sync || tgs[1].Sync {
		t.Fatalf("targets %v: want a syncing search server and a write server without fsync", tgs)
	}
	search, write := labtest.Stats(t, tgs[0]), labtest.Stats(t, tgs[1])
	if q := p.search.Queries; q == 0 || search.PointLookups != q || search.Queries != q || search.QueryErrors != 0 {
		t.Fatalf("client had %d queries answered; search server made %d point lookups for %d queries (%d errors)",
			q, search.PointLookups, search.Queries, search.QueryErrors)
	}
	if search.Records != uint64(p.Records) {
		t.Fatalf("search server wrote %d records, %d preloaded", search.Records, p.Records)
	}
	if p.writes.records == 0 || write.Records != p.writes.records || write.WriteErrors != 0 {
		t.Fatalf("client sent %d records; write server wrote %d (%d errors)", p.writes.records, write.Records, write.WriteErrors)
	}
	if p.writes.acks == 0 || p.writes.noResp != 0 {
		t.Fatalf("%d acknowledgements, %d messages on no-response streams", p.writes.acks, p.writes.noResp)
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
	tg := labtest.Target(t, bench.TargetConfig{NoSync: true})
	if err := tg.LoadItems(ctx, nil, 500); err != nil {
		t.Fatal(err)
	}

	frames, err := bench.SearchFrames(10, 500)
	if err != nil {
		t.Fatal(err)
	}
	var ctr bench.SearchCounter
	queries0 := labtest.Stats(t, tg).PointLookups
	c, err := bench.SinkSearch(tg.Lab, frames, 10, bench.SearchCheck{Records: 1}, &ctr)(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if ctr.Responses != 1 || ctr.Queries != uint64(c.Ops) || c.Ops < 10 {
		t.Fatalf("sink: %d messages received for %d queries", ctr.Responses, c.Ops)
	}
	if got := labtest.Stats(t, tg).PointLookups - queries0; got != uint64(c.Ops) {
		t.Fatalf("sink: server made %d lookups for %d queries", got, c.Ops)
	}

	p := new(Experiment)
	wframes, err := writeFrames(10, false)
	if err != nil {
		t.Fatal(err)
	}
	records0 := labtest.Stats(t, tg).Records
	c, err = p.writeWorkload(tg, patNoResponse, wframes, 10)(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if p.writes.acks != 0 || p.writes.noResp != 0 || c.Ops < 10 {
		t.Fatalf("no-response writes: %d acknowledgements, %d other messages for %d records", p.writes.acks, p.writes.noResp, c.Ops)
	}
	if got := labtest.Stats(t, tg).Records - records0; got != uint64(c.Ops) {
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
