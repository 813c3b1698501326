package watch

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The quick run measures every configuration; each watcher received each
// change once (run checks it), and the server applied exactly what the
// writer had acknowledged.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	g := &Experiment{Batch: 100, Watchers: []int{1, 3}}
	res, env := labtest.Run(t, g)
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
		if !ok || r.Unit != unit || r.Runs != 1 || r.Reference != nil || math.IsNaN(r.Median) {
			t.Errorf("row %+v", r)
		}
		delete(want, r.Name)
		// A latency may be negative (the change overtook the
		// acknowledgement); every other figure is a positive rate.
		if !strings.HasPrefix(r.Unit, "ms") && r.Median <= 0 {
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
	st := labtest.Stats(t, env.Targets()[0])
	if st.Records != uint64(g.written.Load()) || st.WriteErrors != 0 {
		t.Errorf("the writer had %d records acknowledged; the server applied %d (%d errors)", g.written.Load(), st.Records, st.WriteErrors)
	}
}

func TestFlagsOutOfRange(t *testing.T) {
	for _, g := range []*Experiment{{Batch: -1}, {Batch: 100001}, {Watchers: []int{0}}, {Watchers: []int{1, 100000}}} {
		if _, err := g.Run(t.Context(), labtest.Env(t, labtest.Options())); err == nil {
			t.Errorf("%+v ran", g)
		}
	}
}

// The tally reads commits and arrivals from encoded responses the way the
// standard decoder would see them.
func TestTally(t *testing.T) {
	idx := func(i uint32) *uint32 { return &i }
	msgs := []*pb.WatchResponse{
		{Progress: &pb.Position{Commit: 4}},
		{Changes: []*pb.Change{
			{Op: pb.ChangeOp_CHANGE_OP_INSERT, Type: "t", Position: &pb.Position{Commit: 5, Index: idx(0)}},
			{Op: pb.ChangeOp_CHANGE_OP_INSERT, Type: "t", Position: &pb.Position{Commit: 5, Index: idx(1)}},
			{Op: pb.ChangeOp_CHANGE_OP_REMOVE, Type: "t", Position: &pb.Position{Commit: 7, Index: idx(0)}},
		}, Progress: &pb.Position{Commit: 7}},
		{Changes: []*pb.Change{{Position: &pb.Position{Commit: 0, Index: idx(2)}}}},
	}
	var tl changeTally
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := tl.AddWire(b); err != nil {
			t.Fatal(err)
		}
	}
	if tl.messages != 3 || tl.changes != 4 || len(tl.arrivals) != 3 {
		t.Fatalf("tally %+v", tl)
	}
	for i, w := range []struct{ commit, n uint64 }{{5, 2}, {7, 1}, {0, 1}} {
		if a := tl.arrivals[i]; a.commit != w.commit || uint64(a.n) != w.n {
			t.Errorf("arrival %d: %+v, want commit %d n %d", i, a, w.commit, w.n)
		}
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 0x01}, {0x0a, 0x02, 0x32, 0x05}, {0xff}} {
		if err := new(changeTally).AddWire(bad); err == nil {
			t.Errorf("%x tallied", bad)
		}
	}
}

func TestQuantiles(t *testing.T) {
	var l latencies
	l.add(3*time.Millisecond, 1)
	l.add(-time.Millisecond, 1)
	l.add(time.Millisecond, 97)
	l.add(50*time.Millisecond, 1)
	for _, c := range []struct{ q, want float64 }{{0.01, -1}, {0.5, 1}, {0.98, 1}, {0.99, 3}, {1, 50}} {
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

// field's shortcuts for one-byte tags and short lengths find the same
// field, and refuse the same malformed input, as protowire's decoding.
func FuzzField(f *testing.F) {
	idx := uint32(3)
	ch, err := proto.Marshal(&pb.Change{Op: pb.ChangeOp_CHANGE_OP_UPDATE, Type: "t", Record: &anypb.Any{TypeUrl: "u", Value: make([]byte, 300)}, Position: &pb.Position{Commit: 1 << 40, Index: &idx}})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{ch, {0x0a, 0x05, 0x01}, {0x0a, 0x02, 0x32, 0x05}, {0xff}, {0x02, 0x01, 0x00}, {0x32, 0x80, 0x01}, {0x08, 0x80, 0x01, 0x32, 0x00}} {
		f.Add(seed, uint8(6))
	}
	f.Fuzz(func(t *testing.T, msg []byte, num uint8) {
		got, gerr := field(msg, protowire.Number(num%8))
		want, werr := fieldRef(msg, protowire.Number(num%8))
		if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("field(%x, %d) = %x, %v; protowire: %x, %v", msg, num%8, got, gerr, want, werr)
		}
	})
}

// fieldRef is field by protowire's general decoding alone.
func fieldRef(msg []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for len(msg) > 0 {
		f, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, errMalformed
		}
		msg = msg[n:]
		if f == num && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(msg)
			if n < 0 {
				return nil, errMalformed
			}
			out, msg = v, msg[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(f, typ, msg); n < 0 {
			return nil, errMalformed
		}
		msg = msg[n:]
	}
	return out, nil
}
