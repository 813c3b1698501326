package ingest

import (
	"fmt"
	"testing"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The quick run measures every configuration on a syncing and a
// non-syncing server, each server applied exactly the records and batches
// the client sent and stores them all, and the MB/s rows are the
// records/s rows times the size of a record.
func TestQuickRunMatchesServerCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and measures")
	}
	g := &Experiment{Batches: []int{1, 100}}
	res, env := labtest.Run(t, g)
	labtest.CheckResult(t, g, res)

	rates, mbs := labtest.Rows(res, "records/s"), labtest.Rows(res, "MB/s")
	itemBytes := float64(len(bench.AppendItem(nil, g.nextID.Load())))
	for _, sync := range []string{"on", "off"} {
		for _, indexes := range []int{0, 2} {
			for _, batch := range g.Batches {
				name := fmt.Sprintf("indexes=%d sync=%s batch=%d", indexes, sync, batch)
				rate, ok1 := rates[name]
				mb, ok2 := mbs[name]
				if !ok1 || !ok2 {
					t.Errorf("no records/s or MB/s row %q", name)
					continue
				}
				if per := mb.Median * 1e6 / rate.Median; per < itemBytes-2 || per > itemBytes+2 {
					t.Errorf("%s: %.1f bytes per record, want about %.0f", name, per, itemBytes)
				}
			}
		}
	}

	tgs := env.Targets()
	if len(tgs) != 2 || !tgs[0].Sync || tgs[1].Sync {
		t.Fatalf("want a syncing and a non-syncing server, got %d servers", len(tgs))
	}
	ctx := t.Context()
	for _, tg := range tgs {
		w := g.written[tg]
		st := labtest.Stats(t, tg)
		if w == nil || w.Records == 0 || st.Records != w.Records || st.Batches != w.Batches || st.WriteErrors != 0 {
			t.Fatalf("sync=%v: client sent %+v; server applied %d records in %d batches (%d errors)", tg.Sync, w, st.Records, st.Batches, st.WriteErrors)
		}
		var stored uint64
		for _, typ := range []string{bench.ItemType, bench.IndexedItemType} {
			sc := tg.Client.Scan(ctx, &pb.Query{Type: typ, Count: true}, client.ScanOptions{})
			for sc.Next() {
			}
			if err := sc.Err(); err != nil || sc.Count() == 0 {
				t.Fatalf("sync=%v: %d %s stored (%v)", tg.Sync, sc.Count(), typ, err)
			}
			stored += sc.Count()
		}
		if stored != w.Records {
			t.Fatalf("sync=%v: %d records stored, %d inserted", tg.Sync, stored, w.Records)
		}
	}
}
