package client

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/wire"
)

// readSeeds are responses of every shape the fast decoder takes, and some
// it must hand to proto.Unmarshal.
func readSeeds(t testing.TB) [][]byte {
	t.Helper()
	recs := []*anypb.Any{
		{TypeUrl: "type.googleapis.com/shop.User", Value: []byte{8, 1, 18, 3, 'a', 'b', 'c'}},
		{TypeUrl: "type.googleapis.com/shop.User", Value: []byte{8, 2}},
		{TypeUrl: "type.googleapis.com/shop.Order"},
		{Value: []byte{1, 2, 3}},
	}
	msgs := []proto.Message{
		&pb.ScanResponse{},
		&pb.ScanResponse{Records: recs},
		&pb.ScanResponse{Count: 12345678901, Done: true},
		&pb.ScanResponse{Records: recs[:1], Count: 1, Done: true},
		&pb.ScanResponse{Records: recs, Plan: &pb.Plan{Access: "scan"}},
		&pb.QueryResponse{Records: recs, NextPageToken: "tok"},
		&pb.QueryResponse{Count: 7},
		&pb.QueryResponse{Records: recs[1:], Plan: &pb.Plan{Access: "scan"}},
		&pb.GetResponse{Records: recs[:1]},
		&pb.GetResponse{Records: recs, Missing: []uint32{4, 1 << 31}, Unanswered: []uint32{5}, Versions: []uint64{1, 1 << 60}},
		&pb.GetResponse{Missing: []uint32{0}, MissingKeys: []*structpb.Value{structpb.NewStringValue("k")}},
		&pb.GetResponse{Missing: []uint32{0}, MissingKeyRecords: recs[:1]},
	}
	var out [][]byte
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	// Hand-made shapes: an unknown field inside an Any, a type URL of
	// invalid UTF-8, done as a length-delimited field, a truncated record,
	// a repeated type URL, a token of invalid UTF-8.
	anyUnknown := protowire.AppendTag(nil, 3, protowire.VarintType)
	anyUnknown = protowire.AppendVarint(anyUnknown, 1)
	badURL := protowire.AppendTag(nil, wire.AnyTypeURL, protowire.BytesType)
	badURL = protowire.AppendBytes(badURL, []byte{0xff, 0xfe})
	twoURLs := protowire.AppendTag(nil, wire.AnyTypeURL, protowire.BytesType)
	twoURLs = protowire.AppendString(twoURLs, "a")
	twoURLs = protowire.AppendTag(twoURLs, wire.AnyTypeURL, protowire.BytesType)
	twoURLs = protowire.AppendString(twoURLs, "b")
	for _, rec := range [][]byte{anyUnknown, badURL, twoURLs} {
		b := protowire.AppendTag(nil, wire.ScanResponseRecords, protowire.BytesType)
		out = append(out, protowire.AppendBytes(b, rec))
	}
	doneBytes := protowire.AppendTag(nil, wire.ScanResponseDone, protowire.BytesType)
	out = append(out, protowire.AppendBytes(doneBytes, []byte{1}))
	truncated := protowire.AppendTag(nil, wire.ScanResponseRecords, protowire.BytesType)
	out = append(out, protowire.AppendVarint(truncated, 40))
	badToken := protowire.AppendTag(nil, wire.QueryResponseNextPageToken, protowire.BytesType)
	out = append(out, protowire.AppendBytes(badToken, []byte{0xc0}))
	// Missing positions unpacked, and one beyond 32 bits (its low bits kept).
	unpacked := protowire.AppendTag(nil, wire.GetResponseMissing, protowire.VarintType)
	out = append(out, protowire.AppendVarint(unpacked, 3))
	wide := protowire.AppendTag(nil, wire.GetResponseMissing, protowire.BytesType)
	out = append(out, protowire.AppendBytes(wide, protowire.AppendVarint(nil, 1<<40|9)))
	return out
}

// checkDecodeRead decodes b with readCodec and with proto.Unmarshal, as
// each response type, and wants the same messages and the same errors.
func checkDecodeRead(t *testing.T, b []byte) {
	t.Helper()
	for _, newMsg := range []func() proto.Message{
		func() proto.Message { return new(pb.ScanResponse) },
		func() proto.Message { return new(pb.QueryResponse) },
		func() proto.Message { return new(pb.GetResponse) },
	} {
		want, got := newMsg(), newMsg()
		wantErr := proto.Unmarshal(b, want)
		// The transport frees its buffers once the codec returns: scribble
		// over the input afterwards, so that a record still pointing into
		// it shows.
		in := append([]byte(nil), b...)
		gotErr := readCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(in)}, got)
		for i := range in {
			in[i] = 0xaa
		}
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%T of %x: error %v, proto.Unmarshal's %v", got, b, gotErr, wantErr)
		}
		if wantErr == nil && !proto.Equal(want, got) {
			t.Fatalf("%T of %x:\n got %v\nwant %v", got, b, got, want)
		}
	}
}

func TestDecodeReadMatchesProto(t *testing.T) {
	for _, b := range readSeeds(t) {
		checkDecodeRead(t, b)
	}
}

// TestDecodeReadRecordsApart checks that the records of one response are
// separate messages whose values do not overlap: appending to one must not
// change the next.
func TestDecodeReadRecordsApart(t *testing.T) {
	b, err := proto.Marshal(&pb.ScanResponse{Records: []*anypb.Any{
		{TypeUrl: "t/a", Value: []byte("one")}, {TypeUrl: "t/a", Value: []byte("two")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var m pb.ScanResponse
	if err := (readCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Records) != 2 || m.Records[0] == m.Records[1] {
		t.Fatalf("records %v", m.Records)
	}
	_ = append(m.Records[0].Value, 'X')
	if string(m.Records[1].Value) != "two" {
		t.Fatalf("appending to a record's value changed the next one: %q", m.Records[1].Value)
	}
}

func FuzzDecodeRead(f *testing.F) {
	for _, b := range readSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeRead(t, b) })
}

// The read codec encodes the requests Get builds as proto.Marshal does,
// whatever the keys: scalars, 64-bit integers sent as strings, compound
// keys, key records.
func TestEncodeGetRequestMatchesProto(t *testing.T) {
	rec, err := anypb.New(&pb.Position{Commit: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, keys := range [][]any{
		nil,
		{int64(7)},
		{1, int32(-2), uint64(1 << 60), int64(-1 << 62), "ann", "", true, 2.5, []byte{1, 2}},
		{[]any{1, "a"}, map[string]any{"id": 3}},
		{rec, 4},
	} {
		todo := make([]int, len(keys))
		for i := range todo {
			todo[i] = i
		}
		req, _, err := getRequest("shop.User", keys, todo)
		if err != nil {
			t.Fatal(err)
		}
		req.Versions = len(keys)%2 == 1
		want, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readCodec{}.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if b := got.Materialize(); string(b) != string(want) {
			t.Fatalf("keys %v:\n got %x\nwant %x", keys, b, want)
		}
	}
}

// The read codec encodes Query requests as proto.Marshal does.
func TestEncodeQueryRequestMatchesProto(t *testing.T) {
	eq := func(v *pb.Value) *pb.Query {
		return &pb.Query{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id", Op: pb.Op_OP_EQ, Value: v}}}}
	}
	for _, req := range []*pb.QueryRequest{
		{},
		{Query: eq(&pb.Value{Kind: &pb.Value_Int{Int: -7}}), PageSize: 10, PageToken: "tok"},
		{Query: eq(&pb.Value{Kind: &pb.Value_String_{String_: "ann"}})},
		{Query: &pb.Query{Type: "shop.User", Limit: 3, Versions: true, Order: &pb.Order{Descending: true}}},
		{Query: &pb.Query{Type: "shop.User", Filter: "id > 2"}},
	} {
		want, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readCodec{}.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if b := got.Materialize(); string(b) != string(want) {
			t.Fatalf("%v:\n got %x\nwant %x", req, b, want)
		}
	}
}
