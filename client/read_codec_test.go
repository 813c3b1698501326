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

// checkDecodeRead decodes b with callCodec and with proto.Unmarshal, as
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
		gotErr := callCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(in)}, got)
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
	if err := (callCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &m); err != nil {
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
		got, err := callCodec{}.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if b := got.Materialize(); string(b) != string(want) {
			t.Fatalf("keys %v:\n got %x\nwant %x", keys, b, want)
		}
	}
}

// A request of one key built in one allocation (loneRequest) is the
// request the general path builds, at the edges of what it takes (numbers
// a JSON number holds exactly, strings); other keys it leaves to that path.
func TestLoneRequestMatchesGeneral(t *testing.T) {
	for _, tc := range []struct {
		key  any
		lone bool
	}{
		{0, true}, {-7, true}, {int64(1 << 53), true}, {int64(-1 << 53), true}, {int32(-5), true},
		{"", true}, {"ann", true},
		{int64(1<<53 + 1), false}, {int64(-1<<53 - 1), false}, {uint64(3), false}, {2.5, false}, {true, false},
		{[]byte{1}, false}, {[]any{1, "a"}, false},
	} {
		got := loneRequest("shop.User", tc.key)
		if (got != nil) != tc.lone {
			t.Errorf("key %#v: lone request %v, want %v", tc.key, got != nil, tc.lone)
			continue
		}
		v, err := keyValue(tc.key)
		if err != nil {
			t.Fatal(err)
		}
		want := &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{v}}
		if got != nil && !proto.Equal(got, want) {
			t.Errorf("key %#v: lone request %v, want %v", tc.key, got, want)
		}
		if req, _, err := getRequest("shop.User", []any{tc.key}, []int{0}); err != nil || !proto.Equal(req, want) {
			t.Errorf("key %#v: getRequest %v, %v; want %v", tc.key, req, err, want)
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
		got, err := callCodec{}.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if b := got.Materialize(); string(b) != string(want) {
			t.Fatalf("%v:\n got %x\nwant %x", req, b, want)
		}
	}
}

// BenchmarkOneKeyGet compares, for a Get of one key, the generated code
// with this package's: building the request (getRequest) and encoding it,
// and decoding the answer of one record (a new GetResponse each time, as a
// call receives it).
func BenchmarkOneKeyGet(b *testing.B) {
	resp, err := proto.Marshal(&pb.GetResponse{Records: []*anypb.Any{
		{TypeUrl: "type.googleapis.com/bench.Item", Value: make([]byte, 100)},
	}})
	if err != nil {
		b.Fatal(err)
	}
	data := mem.BufferSlice{mem.SliceBuffer(resp)}
	keys := []any{int64(4242)}
	b.Run("request/generated", func(b *testing.B) {
		for b.Loop() {
			v, err := keyValue(keys[0])
			if err != nil {
				b.Fatal(err)
			}
			if _, err := protoCodec.Marshal(&pb.GetRequest{Type: "bench.Item", Keys: []*structpb.Value{v}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("request/hand", func(b *testing.B) {
		for b.Loop() {
			req, _, err := getRequest("bench.Item", keys, []int{0})
			if err != nil {
				b.Fatal(err)
			}
			out, err := callCodec{}.Marshal(req)
			if err != nil {
				b.Fatal(err)
			}
			out.Free()
		}
	})
	for _, c := range []struct {
		name  string
		codec interface {
			Unmarshal(mem.BufferSlice, any) error
		}
	}{{"answer/generated", protoCodec}, {"answer/hand", callCodec{}}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				m := new(pb.GetResponse)
				if err := c.codec.Unmarshal(data, m); err != nil || len(m.Records) != 1 {
					b.Fatal(err)
				}
			}
		})
	}
}
