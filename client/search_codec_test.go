package client

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/wire"
)

// searchSeeds are SearchResponses of every shape the fast decoder takes,
// and some it must hand to proto.Unmarshal.
func searchSeeds(t testing.TB) [][]byte {
	t.Helper()
	recs := []*anypb.Any{
		{TypeUrl: "type.googleapis.com/shop.User", Value: []byte{8, 1, 18, 3, 'a', 'b', 'c'}},
		{TypeUrl: "type.googleapis.com/shop.User", Value: []byte{8, 2}},
		{TypeUrl: "type.googleapis.com/shop.Order"},
		{Value: []byte{1, 2, 3}},
	}
	plan := &pb.Plan{Access: "index_range", Index: "email", Ranges: 1}
	msgs := []proto.Message{
		&pb.SearchResponse{},
		&pb.SearchResponse{Results: []*pb.ResultBatch{{Query: 3, Records: recs}}},
		&pb.SearchResponse{Results: []*pb.ResultBatch{{Query: 1, Records: recs[:1]}, {Query: 2, Records: recs[1:]}, {}}},
		&pb.SearchResponse{Results: []*pb.ResultBatch{{Query: 9, Records: recs, Plan: plan}}},
		&pb.SearchResponse{Done: []*pb.QueryDone{{Query: 1, Count: 4}, {Query: 2, Plan: plan}}},
		&pb.SearchResponse{Errors: []*pb.QueryError{{Query: 5, Code: 3, Message: "bad field", Field: "where.cmp"}}},
		&pb.SearchResponse{
			Results: []*pb.ResultBatch{{Query: 1, Records: recs[:2]}},
			Done:    []*pb.QueryDone{{Query: 1, Count: 2}},
			Errors:  []*pb.QueryError{{Query: 2, Code: 5, Message: "no such type"}},
		},
	}
	out := marshalAll(t, msgs)
	// Hand-made shapes: a batch with an unknown field, a record with an
	// unknown field, the query as a length-delimited field, the query
	// twice, the plan twice (the two merge), a plan that does not decode,
	// a QueryError with a message of invalid UTF-8, a truncated batch, an
	// unknown top-level field, a top-level varint.
	rec := field(nil, wire.AnyTypeURL, []byte("t/a"))
	rec = field(rec, wire.AnyValue, []byte{8, 1})
	batches := [][]byte{
		varint(field(nil, wire.ResultBatchRecords, rec), 7, 1),
		field(nil, wire.ResultBatchRecords, varint(rec, 3, 1)),
		field(nil, wire.ResultBatchQuery, []byte{1}),
		varint(varint(field(nil, wire.ResultBatchRecords, rec), wire.ResultBatchQuery, 4), wire.ResultBatchQuery, 5),
		field(field(nil, wire.ResultBatchPlan, []byte{10, 1, 'a'}), wire.ResultBatchPlan, []byte{18, 1, 'b'}),
		field(nil, wire.ResultBatchPlan, []byte{10, 40}),
	}
	for _, batch := range batches {
		out = append(out, field(nil, wire.SearchResponseResults, batch))
	}
	out = append(out,
		field(nil, wire.SearchResponseErrors, []byte{26, 1, 0xff}),
		protowire.AppendVarint(protowire.AppendTag(nil, wire.SearchResponseResults, protowire.BytesType), 30),
		field(field(nil, wire.SearchResponseResults, field(nil, wire.ResultBatchRecords, rec)), 9, nil),
		varint(nil, wire.SearchResponseDone, 1),
	)
	return out
}

// checkDecodeSearch decodes b with callCodec and with proto.Unmarshal and
// wants the same message and the same error.
func checkDecodeSearch(t *testing.T, b []byte) {
	t.Helper()
	var want, got pb.SearchResponse
	wantErr := proto.Unmarshal(b, &want)
	// The transport frees its buffers once the codec returns: scribble
	// over the input afterwards, so that a record still pointing into it
	// shows.
	in := append([]byte(nil), b...)
	gotErr := callCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(in)}, &got)
	for i := range in {
		in[i] = 0xaa
	}
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%x: error %v, proto.Unmarshal's %v", b, gotErr, wantErr)
	}
	if wantErr == nil && !proto.Equal(&want, &got) {
		t.Fatalf("%x:\n got %v\nwant %v", b, &got, &want)
	}
}

func TestDecodeSearchMatchesProto(t *testing.T) {
	for _, b := range searchSeeds(t) {
		checkDecodeSearch(t, b)
	}
}

// TestDecodeSearchBatchesApart checks that the batches of one response,
// whose records share one slab, do not overlap: appending to one batch's
// records, or to a record's value, must not change the next.
func TestDecodeSearchBatchesApart(t *testing.T) {
	b, err := proto.Marshal(&pb.SearchResponse{Results: []*pb.ResultBatch{
		{Query: 1, Records: []*anypb.Any{{TypeUrl: "t/a", Value: []byte("one")}}},
		{Query: 2, Records: []*anypb.Any{{TypeUrl: "t/a", Value: []byte("two")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var m pb.SearchResponse
	if err := (callCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Results) != 2 || m.Results[0] == m.Results[1] {
		t.Fatalf("results %v", m.Results)
	}
	first, second := m.Results[0].Records, m.Results[1].Records
	_ = append(first, &anypb.Any{TypeUrl: "t/x"})
	_ = append(first[0].Value, 'X')
	if second[0].TypeUrl != "t/a" || string(second[0].Value) != "two" {
		t.Fatalf("appending to the first batch changed the second: %v", second[0])
	}
}

// TestDecodeSearchAllocs checks the point of the decoder: the allocations
// of a response do not grow with its records or its batches.
func TestDecodeSearchAllocs(t *testing.T) {
	allocs := func(batches, perBatch int) float64 {
		var resp pb.SearchResponse
		for q := range batches {
			rb := &pb.ResultBatch{Query: uint64(q)}
			for i := range perBatch {
				rb.Records = append(rb.Records, &anypb.Any{TypeUrl: "type.googleapis.com/shop.User", Value: []byte{8, byte(i)}})
			}
			resp.Results = append(resp.Results, rb)
		}
		b, err := proto.Marshal(&resp)
		if err != nil {
			t.Fatal(err)
		}
		data := mem.BufferSlice{mem.SliceBuffer(b)}
		return testing.AllocsPerRun(20, func() {
			var m pb.SearchResponse
			if err := (callCodec{}).Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(1, 10), allocs(100, 100)
	if large > small+2 {
		t.Fatalf("%v allocations for 100 batches of 100 records, %v for 1 of 10: they should not grow", large, small)
	}
}

func FuzzDecodeSearch(f *testing.F) {
	for _, b := range searchSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeSearch(t, b) })
}

// A Search request of lookups goes out as proto.Marshal writes it,
// written by hand into a buffer the pool gets back: one allocation (the
// list holding the buffer), where proto.Marshal took three. A request of
// another shape is proto.Marshal's.
func TestSearchRequestMarshal(t *testing.T) {
	lookup := &pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
		Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: 12345}}}}}}}}
	ordered := &pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User", Order: &pb.Order{Descending: true}}}}
	for _, m := range []*pb.SearchRequest{lookup, ordered} {
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out, err := callCodec{}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); string(got) != string(want) {
			t.Fatalf("%v: marshalled %x, want %x", m, got, want)
		}
		out.Free()
	}
	allocs := testing.AllocsPerRun(100, func() {
		out, err := callCodec{}.Marshal(lookup)
		if err != nil {
			t.Fatal(err)
		}
		out.Free()
	})
	if allocs > 1 {
		t.Fatalf("%v allocations to marshal a request of one lookup, want 1", allocs)
	}
}
