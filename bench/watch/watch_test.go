package watch

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The quick run measures every configuration; each watcher received each
// change once (run checks it), and the servers applied exactly what the
// writer had acknowledged: each run's server counts only its own run's
// records, so a store shared between runs would count some twice.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	g := &Experiment{Batch: 100, Watchers: []int{1, 3}}
	opts := labtest.Options()
	opts.Runs, opts.Warmup = 2, 30*time.Millisecond
	res, err := labtest.Env(t, opts).Run(t.Context(), g)
	if err != nil {
		t.Fatal(err)
	}
	if res.Experiment != "watch" || res.Chart == nil {
		t.Fatalf("result %+v", res)
	}
	want := map[string]string{
		"ingest watchers=0": "records/s", "ingest watchers=1": "records/s", "ingest watchers=3": "records/s",
		"ingest with 1 watcher / with none": "× rate without watchers",
		"delivered per watcher, watchers=1": "changes/s", "delivered per watcher, watchers=3": "changes/s",
		"latency p50 watchers=1": "ms, p50", "latency p99 watchers=1": "ms", "latency max watchers=1": "ms",
		"latency p50 watchers=3": "ms, p50", "latency p99 watchers=3": "ms", "latency max watchers=3": "ms",
	}
	for _, r := range res.Rows {
		unit, ok := want[r.Name]
		if !ok || r.Unit != unit || r.Runs != opts.Runs || r.Reference != nil || math.IsNaN(r.Median) {
			t.Errorf("row %+v", r)
		}
		delete(want, r.Name)
		// A latency may be 0 (the change overtook the
		// acknowledgement), never negative; every other figure is a
		// positive rate.
		if (strings.HasPrefix(r.Unit, "ms") && r.Min < 0) || (!strings.HasPrefix(r.Unit, "ms") && r.Median <= 0) {
			t.Errorf("row %+v", r)
		}
	}
	for name := range want {
		t.Errorf("no row %q", name)
	}
	lat, p50 := labtest.Rows(res, "ms"), labtest.Rows(res, "ms, p50")["latency p50 watchers=3"]
	if p99, pmax := lat["latency p99 watchers=3"], lat["latency max watchers=3"]; p50.Median > p99.Median || p99.Median > pmax.Median {
		t.Errorf("p50 %v, p99 %v, max %v out of order", p50.Median, p99.Median, pmax.Median)
	}
	if err := bench.Draw(res, filepath.Join(t.TempDir(), "c.png")); err != nil {
		t.Error(err)
	}
	if g.written.Load() == 0 || g.applied.Load() != g.written.Load() {
		t.Errorf("the writer had %d records acknowledged; the servers applied %d", g.written.Load(), g.applied.Load())
	}
}

func TestFlagsOutOfRange(t *testing.T) {
	for _, g := range []*Experiment{{Batch: -1}, {Batch: 100001}, {Watchers: []int{0}}, {Watchers: []int{1, 100000}}} {
		if _, err := g.Run(t.Context(), labtest.Env(t, labtest.Options())); err == nil {
			t.Errorf("%+v ran", g)
		}
	}
}

// The tally counts each message's changes by commit and refuses a change
// that is not an insert of the type with its key, record and position.
func TestTally(t *testing.T) {
	idx := func(i uint32) *uint32 { return &i }
	rec := &anypb.Any{TypeUrl: "type.googleapis.com/t", Value: []byte{8, 1}}
	ins := func(commit uint64, i uint32) *pb.Change {
		return &pb.Change{Op: pb.ChangeOp_CHANGE_OP_INSERT, Type: "t", Key: rec, Record: rec, Position: &pb.Position{Commit: commit, Index: idx(i)}}
	}
	var tl changeTally
	at := time.Now()
	for _, batch := range [][]*pb.Change{{ins(5, 0), ins(5, 1), ins(7, 0)}, {ins(7, 1)}} {
		if err := tl.add(batch, "t", at); err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Millisecond)
	}
	if tl.messages != 2 || tl.changes != 4 || tl.bytes != 8 || len(tl.arrivals) != 3 {
		t.Fatalf("tally %+v", tl)
	}
	for i, w := range []struct{ commit, n uint64 }{{5, 2}, {7, 1}, {7, 1}} {
		if a := tl.arrivals[i]; a.commit != w.commit || uint64(a.n) != w.n {
			t.Errorf("arrival %d: %+v, want commit %d n %d", i, a, w.commit, w.n)
		}
	}
	rm := ins(8, 0)
	rm.Op, rm.Record = pb.ChangeOp_CHANGE_OP_REMOVE, nil
	noPos := ins(8, 0)
	noPos.Position = nil
	other := ins(8, 0)
	other.Type = "u"
	for _, bad := range []*pb.Change{rm, noPos, other, {}} {
		if err := new(changeTally).add([]*pb.Change{bad}, "t", at); err == nil {
			t.Errorf("%v tallied", bad)
		}
	}
}

// A change that reached its watcher before the writer had its
// acknowledgement counts as 0 ms, never as a negative lag.
func TestQuantiles(t *testing.T) {
	var l latencies
	l.add(3*time.Millisecond, 1)
	l.add(-26*time.Microsecond, 1)
	l.add(time.Millisecond, 97)
	l.add(50*time.Millisecond, 1)
	for _, c := range []struct{ q, want float64 }{{0.01, 0}, {0.5, 1}, {0.98, 1}, {0.99, 3}, {1, 50}} {
		if got := l.quantile(c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := new(latencies).quantile(0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestRunOrder(t *testing.T) {
	for _, c := range []struct {
		n, run int
		want   string
	}{{3, 0, "[0 1 2]"}, {3, 1, "[1 0 2]"}, {3, 2, "[0 1 2]"}, {1, 1, "[0]"}} {
		if got := fmt.Sprint(runOrder(c.n, c.run)); got != c.want {
			t.Errorf("runOrder(%d, %d) = %s, want %s", c.n, c.run, got, c.want)
		}
	}
}
