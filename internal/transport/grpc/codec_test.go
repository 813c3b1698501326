package grpc

import (
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func cmpQuery(typ, field string, op pb.Op, v *pb.Value) *pb.Query {
	return &pb.Query{Type: typ, Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: field, Op: op, Value: v}}}}
}

// searchSeeds are requests of every shape: the fast path's and the ones it
// must hand to the generated decoder.
func searchSeeds() []*pb.SearchRequest {
	point := cmpQuery("shop.User", "id", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Int{Int: -42}})
	return []*pb.SearchRequest{
		{},
		{Queries: []*pb.Query{point}},
		{Queries: []*pb.Query{
			point,
			cmpQuery("shop.User", "id", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Int{Int: 7}}),
			cmpQuery("shop.Doc", "k", pb.Op_OP_GE, &pb.Value{Kind: &pb.Value_Uint{Uint: 1 << 63}}),
			cmpQuery("shop.Doc", "name", pb.Op_OP_PREFIX, &pb.Value{Kind: &pb.Value_String_{String_: "Ann"}}),
			cmpQuery("shop.Doc", "blob", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Bytes{Bytes: []byte{}}}),
			cmpQuery("shop.Doc", "on", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Bool{Bool: true}}),
			cmpQuery("shop.Doc", "x", pb.Op(99), &pb.Value{Kind: &pb.Value_Double{Double: 1.5}}),
			cmpQuery("shop.Doc", "s", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Enum{Enum: "ACTIVE"}}),
			{Type: "shop.User", Limit: 10, KeysOnly: true, Count: true, Explain: true},
			{Type: "shop.User", Order: &pb.Order{Index: "by_name", Descending: true}},
			{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: []*pb.Expr{point.Where, point.Where}}}}},
			{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Not{Not: point.Where}}},
			{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id", Op: pb.Op_OP_IN,
				Values: []*pb.Value{{Kind: &pb.Value_Int{Int: 1}}, {Kind: &pb.Value_Int{Int: 2}}}}}}},
			{Where: &pb.Expr{}},
			{},
		}},
	}
}

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkDecode fails unless decodeSearch agrees with proto.Unmarshal on b.
func checkDecode(t *testing.T, b []byte) {
	var want, got pb.SearchRequest
	werr := proto.Unmarshal(b, &want)
	gerr := decodeSearch(b, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("proto.Unmarshal error %v, decodeSearch error %v, input %x", werr, gerr, b)
	}
	if werr == nil && !proto.Equal(&want, &got) {
		t.Fatalf("decodeSearch differs from proto.Unmarshal on %x:\n got  %v\n want %v", b, &got, &want)
	}
	// Decoded over a request of every shape, reusing its messages, b
	// reads the same: nothing of the earlier request shows through.
	d := NewSearchDecoder()
	if err := decodeSearchInto(marshal(t, searchSeeds()[2]), d.SearchRequest, &d.s); err != nil {
		t.Fatal(err)
	}
	rerr := decodeSearchInto(b, d.SearchRequest, &d.s)
	if (werr == nil) != (rerr == nil) {
		t.Fatalf("proto.Unmarshal error %v, reused decoder's error %v, input %x", werr, rerr, b)
	}
	if werr == nil && !proto.Equal(&want, d.SearchRequest) {
		t.Fatalf("reused decoder differs from proto.Unmarshal on %x:\n got  %v\n want %v", b, d.SearchRequest, &want)
	}
}

func TestDecodeSearch(t *testing.T) {
	for _, req := range searchSeeds() {
		b := marshal(t, req)
		checkDecode(t, b)
		// Every truncation, and a byte flipped everywhere.
		for i := range b {
			checkDecode(t, b[:i])
			c := append([]byte(nil), b...)
			c[i] ^= 0x80
			checkDecode(t, c)
		}
	}
	// Invalid UTF-8 in each string is refused, as by the generated code.
	for _, q := range []*pb.Query{
		cmpQuery("shop.\xff", "id", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Int{Int: 1}}),
		cmpQuery("shop.User", "i\xffd", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Int{Int: 1}}),
		cmpQuery("shop.User", "id", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_String_{String_: "\xc3"}}),
	} {
		b, err := proto.MarshalOptions{}.Marshal(&pb.SearchRequest{Queries: []*pb.Query{q}})
		if err == nil {
			t.Fatal("marshalled invalid UTF-8")
		}
		_ = b
	}
	// Hand-made invalid UTF-8 (the generated encoder refuses to make it).
	bad := []byte{0x0a, 0x05, 0x0a, 0x03, 'a', 0xff, 'b'}
	var got pb.SearchRequest
	if err := decodeSearch(bad, &got); err == nil {
		t.Fatal("invalid UTF-8 in Query.type accepted")
	}
}

// TestCodecSharesStrings checks the point of the fast path: a batch of
// lookups on one type shares the type and field strings.
func TestCodecSharesStrings(t *testing.T) {
	req := searchSeeds()[2]
	var got pb.SearchRequest
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(marshal(t, req))}, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(req, &got) {
		t.Fatalf("codec: %v", &got)
	}
	a, b := got.Queries[0], got.Queries[1]
	if a == b || a.Where == b.Where {
		t.Fatal("queries share messages")
	}
	if unsafe.StringData(a.Type) != unsafe.StringData(b.Type) || unsafe.StringData(a.Where.GetCmp().Field) != unsafe.StringData(b.Where.GetCmp().Field) {
		t.Fatal("queries of one type do not share the type and field strings")
	}
	data := marshal(t, batchOfPoints(1000))
	allocs := testing.AllocsPerRun(100, func() {
		var r pb.SearchRequest
		if err := decodeSearch(data, &r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 20 { // the generated decoder makes > 8000
		t.Fatalf("%v allocations decoding 1000 point lookups", allocs)
	}
	// Through the codec into a reused decoder: none per query once it has
	// grown (the codec's buffer handling makes a couple per request).
	d := NewSearchDecoder()
	allocs = testing.AllocsPerRun(100, func() {
		if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, d); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 || len(d.Queries) != 1000 {
		t.Fatalf("%v allocations decoding 1000 point lookups into a reused decoder (%d queries)", allocs, len(d.Queries))
	}
}

func batchOfPoints(n int) *pb.SearchRequest {
	req := &pb.SearchRequest{}
	for i := range n {
		req.Queries = append(req.Queries, cmpQuery("bench.Item", "id", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Int{Int: int64(i)}}))
	}
	return req
}

func BenchmarkDecodeSearch(b *testing.B) {
	data := marshal(b, batchOfPoints(1000))
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var r pb.SearchRequest
			if err := decodeSearch(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reused", func(b *testing.B) {
		b.ReportAllocs()
		d := NewSearchDecoder()
		for range b.N {
			if err := decodeSearchInto(data, d.SearchRequest, &d.s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var r pb.SearchRequest
			if err := proto.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func FuzzDecodeSearch(f *testing.F) {
	for _, req := range searchSeeds() {
		f.Add(marshal(f, req))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecode(t, b) })
}

// The codec's query limit counts the queries of requests of every shape:
// the fast path's, and one the generated decoder takes (an unknown field
// before the queries).
func TestCodecMaxQueries(t *testing.T) {
	c := Codec{MaxQueries: 3}
	unknown := []byte{0x78, 0x01} // field 15, varint 1
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"3 queries", marshal(t, batchOfPoints(3)), true},
		{"4 queries", marshal(t, batchOfPoints(4)), false},
		{"3 after an unknown field", append(append([]byte(nil), unknown...), marshal(t, batchOfPoints(3))...), true},
		{"4 after an unknown field", append(append([]byte(nil), unknown...), marshal(t, batchOfPoints(4))...), false},
	} {
		for _, into := range []any{new(pb.SearchRequest), NewSearchDecoder()} {
			err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.b)}, into)
			if (err == nil) != tc.ok {
				t.Errorf("%s into %T: error %v", tc.name, into, err)
			}
		}
	}
}
