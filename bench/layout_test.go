package bench

import (
	"flag"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/client"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Both layouts carry the same content, the flat one at the size asked
// for, and the wrapped payload decodes to the flat event's payload fields.
func TestLayoutEventsSameContent(t *testing.T) {
	for _, sz := range layoutSizes[:4] {
		ev, err := newLayoutEvents(sz.bytes)
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.flatBytes) != sz.bytes || len(ev.wrappedBytes) <= sz.bytes || len(ev.wrappedBytes) > sz.bytes+4 {
			t.Fatalf("%s: flat %d bytes, wrapped %d, want %d and a few more", sz.name, len(ev.flatBytes), len(ev.wrappedBytes), sz.bytes)
		}
		w := new(labv1.WrappedEvent)
		if err := proto.Unmarshal(ev.wrappedBytes, w); err != nil {
			t.Fatal(err)
		}
		p := new(labv1.EventPayload)
		if err := proto.Unmarshal(w.Payload, p); err != nil {
			t.Fatal(err)
		}
		f := new(labv1.FlatEvent)
		if err := proto.Unmarshal(ev.flatBytes, f); err != nil {
			t.Fatal(err)
		}
		rebuilt := &labv1.FlatEvent{Id: w.Id, ClientId: w.ClientId, Topic: w.Topic, Created: w.Created, Seq: w.Seq, Mimetype: w.Mimetype,
			Data: p.Data, Meta: p.Meta, Tags: p.Tags}
		if !proto.Equal(f, rebuilt) {
			t.Fatalf("%s: the layouts differ in content", sz.name)
		}
	}
}

// The records the server side inserts are the events' encodings: header
// appended by hand, then the marshalled tail.
func TestLayoutRecordsEncodeEvents(t *testing.T) {
	ev, err := newLayoutEvents(layoutSizes[0].bytes)
	if err != nil {
		t.Fatal(err)
	}
	flat, wrapped, err := newLayoutRecords(ev)
	if err != nil {
		t.Fatal(err)
	}
	f := new(labv1.FlatEvent)
	if err := proto.Unmarshal(flat.appendRecord(nil, 0), f); err != nil || !proto.Equal(f, ev.flat) {
		t.Fatalf("flat record decodes to %v (%v)", f, err)
	}
	w := new(labv1.WrappedEvent)
	if err := proto.Unmarshal(wrapped.appendRecord(nil, 0), w); err != nil || !proto.Equal(w, ev.wrapped) {
		t.Fatalf("wrapped record decodes to %v (%v)", w, err)
	}
}

// The server's record types read the lab's encodings: inserted events of
// both layouts are found through both header indexes.
func TestLayoutServerReadsHeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	ctx := t.Context()
	env := NewEnv(tinyOptions(), nil)
	t.Cleanup(func() { _ = env.Close() })
	tg, err := env.Target(ctx, TargetConfig{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.EnsureSchema(ctx, layoutSchema); err != nil {
		t.Fatal(err)
	}
	ev, err := newLayoutEvents(layoutSizes[0].bytes)
	if err != nil {
		t.Fatal(err)
	}
	flat, wrapped, err := newLayoutRecords(ev)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2 * layoutClients
	for _, lr := range []layoutRecords{flat, wrapped} {
		var next int64
		c, err := layoutInsert(tg, lr, n, &next)(ctx, time.Millisecond)
		if err != nil || c.Ops == 0 || c.Ops%n != 0 {
			t.Fatalf("inserted %d records (%v)", c.Ops, err)
		}
		typ := lr.typeURL[len(typeURLPrefix):]
		for field, value := range map[string]string{"client_id": "client-01", "topic": "topic-03"} {
			q := &pb.Query{Type: typ, Count: true, Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
				Field: field, Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_String_{String_: value}},
			}}}}
			sc := tg.Client.Scan(ctx, q, client.ScanOptions{})
			for sc.Next() {
			}
			want := uint64(c.Ops / layoutClients)
			if field == "topic" {
				want = uint64(c.Ops / layoutTopics)
			}
			if sc.Err() != nil || sc.Count() != want {
				t.Fatalf("%s %s=%s: %d records (%v), want %d", typ, field, value, sc.Count(), sc.Err(), want)
			}
		}
	}
}

// runBenchmark runs for about the time asked, restores the bench time it
// set, and reports a failed benchmark as an error.
func TestRunBenchmark(t *testing.T) {
	before := flag.Lookup("test.benchtime").Value.String()
	r, err := runBenchmark(time.Millisecond, func(b *testing.B) {
		for b.Loop() {
		}
	})
	if err != nil || r.N < 2 || r.T > time.Second {
		t.Fatalf("%+v %v", r, err)
	}
	if after := flag.Lookup("test.benchtime").Value.String(); after != before {
		t.Fatalf("bench time %s after the run, %s before", after, before)
	}
	if _, err := runBenchmark(time.Millisecond, func(b *testing.B) { b.Fatal("boom") }); err == nil {
		t.Fatal("a failed benchmark reported no error")
	}
}

// When several series carry published figures at the same X (layout's
// four seed series per size), each gets its own published series instead
// of overwriting one another.
func TestChartDataPublishedPerSeries(t *testing.T) {
	ref := func(v float64) *Reference { return &Reference{Value: v} }
	rows := []Row{
		{Params: map[string]any{"x": 1, "s": "a"}, Median: 10, Reference: ref(1)},
		{Params: map[string]any{"x": 1, "s": "b"}, Median: 20, Reference: ref(2)},
		{Params: map[string]any{"x": 1, "s": "c"}, Median: 30},
	}
	_, series := chartData(&Chart{X: "x", Series: "s"}, rows)
	var names []string
	for _, s := range series {
		names = append(names, s.name)
	}
	if len(series) != 5 || series[3].name != "a (published)" || series[3].values["1"] != 1 || series[3].of != 0 ||
		series[4].name != "b (published)" || series[4].values["1"] != 2 || series[4].of != 1 {
		t.Fatalf("series %v", names)
	}
}
