package layout

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
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
	tg := labtest.Target(t, bench.TargetConfig{NoSync: true})
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
		c, err := layoutInsert(tg, lr, n, &next, nil)(ctx, time.Millisecond)
		if err != nil || c.Ops == 0 || c.Ops%n != 0 {
			t.Fatalf("inserted %d records (%v)", c.Ops, err)
		}
		typ := lr.typeURL[len(bench.TypeURLPrefix):]
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

// The quick run measures every series at every size with what the
// operations must cost: marshalling allocates at least the encoding,
// decoding the payload too costs more allocations than the header alone,
// and the flat layout's many fields more than the wrapped header. Each
// server-side configuration ran on a server of its own, which applied and
// stores exactly the records the client sent, all of one layout, and the
// MB/s rows are the records/s rows times a record's size.
func TestQuickRunMeasuresWhatItClaims(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and measures")
	}
	l := &Experiment{Sizes: []string{"Tiny", "Small"}}
	res, env := labtest.Run(t, l)
	labtest.CheckResult(t, l, res)
	byUnit := map[string]map[string]bench.Row{}
	for _, u := range []string{"ns/op", "B/op", "allocs/op", "records/s", "MB/s"} {
		byUnit[u] = labtest.Rows(res, u)
	}
	ev, err := newLayoutEvents(layoutSizes[0].bytes)
	if err != nil {
		t.Fatal(err)
	}
	sizes, err := l.sizes(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, sz := range sizes {
		for _, c := range layoutCases(ev) {
			for _, u := range layoutUnits {
				if _, ok := byUnit[u][sz.name+" "+c.series()]; !ok {
					t.Errorf("no %s row for %s %s", u, sz.name, c.series())
				}
			}
		}
		allocs := func(series string) float64 { return byUnit["allocs/op"][sz.name+" "+series].Median }
		if b := byUnit["B/op"][sz.name+" flat marshal"].Median; b < float64(sz.bytes) {
			t.Errorf("%s flat marshal: %v B/op for a %d-byte encoding", sz.name, b, sz.bytes)
		}
		if allocs("wrapped unmarshal+payload") <= allocs("wrapped unmarshal") || allocs("flat unmarshal") <= allocs("wrapped unmarshal") {
			t.Errorf("%s allocs/op: flat unmarshal %v, wrapped %v, wrapped+payload %v", sz.name,
				allocs("flat unmarshal"), allocs("wrapped unmarshal"), allocs("wrapped unmarshal+payload"))
		}
		for _, layout := range []string{"flat", "wrapped"} {
			name := "server insert " + sz.name + " " + layout
			rate, mb := byUnit["records/s"][name], byUnit["MB/s"][name]
			if per := mb.Median * 1e6 / rate.Median; per < float64(sz.bytes) || per > float64(sz.bytes)+32 {
				t.Errorf("%s: %.0f bytes per record, want about %d", name, per, sz.bytes)
			}
		}
	}

	if len(l.written) != 4 || len(env.Targets()) != 4 {
		t.Fatalf("%d servers written to, %d started; want one per size and layout", len(l.written), len(env.Targets()))
	}
	for tg, w := range l.written {
		st := labtest.Stats(t, tg)
		if w.Records == 0 || st.Records != w.Records || st.Batches != w.Batches || st.WriteErrors != 0 {
			t.Fatalf("client sent %+v; server applied %d records in %d batches (%d errors)", w, st.Records, st.Batches, st.WriteErrors)
		}
		var counts []uint64
		for _, typ := range []string{flatEventType, wrappedEventType} {
			sc := tg.Client.Scan(t.Context(), &pb.Query{Type: typ, Count: true}, client.ScanOptions{})
			for sc.Next() {
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			counts = append(counts, sc.Count())
		}
		if counts[0]+counts[1] != w.Records || counts[0] != 0 && counts[1] != 0 {
			t.Fatalf("server stores %d flat and %d wrapped events, %d inserted", counts[0], counts[1], w.Records)
		}
	}
}
