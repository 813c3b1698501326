package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

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

// checkDecodeSearchRequest fails unless DecodeSearchRequest agrees with proto.Unmarshal on b.
func checkDecodeSearchRequest(t *testing.T, b []byte) {
	var want, got pb.SearchRequest
	werr := proto.Unmarshal(b, &want)
	gerr := DecodeSearchRequest(b, &got, nil)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("proto.Unmarshal error %v, DecodeSearchRequest error %v, input %x", werr, gerr, b)
	}
	if werr == nil && !proto.Equal(&want, &got) {
		t.Fatalf("DecodeSearchRequest differs from proto.Unmarshal on %x:\n got  %v\n want %v", b, &got, &want)
	}
	// Decoded over a request of every shape, reusing its messages, b
	// reads the same: nothing of the earlier request shows through.
	var s SearchSlabs
	var reused pb.SearchRequest
	if err := DecodeSearchRequest(marshal(t, searchSeeds()[2]), &reused, &s); err != nil {
		t.Fatal(err)
	}
	rerr := DecodeSearchRequest(b, &reused, &s)
	if (werr == nil) != (rerr == nil) {
		t.Fatalf("proto.Unmarshal error %v, reused decoder's error %v, input %x", werr, rerr, b)
	}
	if werr == nil && !proto.Equal(&want, &reused) {
		t.Fatalf("reused decoder differs from proto.Unmarshal on %x:\n got  %v\n want %v", b, &reused, &want)
	}
}

func TestDecodeSearchRequest(t *testing.T) {
	for _, req := range searchSeeds() {
		b := marshal(t, req)
		checkDecodeSearchRequest(t, b)
		// Every truncation, and a byte flipped everywhere.
		for i := range b {
			checkDecodeSearchRequest(t, b[:i])
			c := append([]byte(nil), b...)
			c[i] ^= 0x80
			checkDecodeSearchRequest(t, c)
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
	if err := DecodeSearchRequest(bad, &got, nil); err == nil {
		t.Fatal("invalid UTF-8 in Query.type accepted")
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
			if err := DecodeSearchRequest(data, &r, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reused", func(b *testing.B) {
		b.ReportAllocs()
		var s SearchSlabs
		var r pb.SearchRequest
		for range b.N {
			if err := DecodeSearchRequest(data, &r, &s); err != nil {
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

func FuzzDecodeSearchRequest(f *testing.F) {
	for _, req := range searchSeeds() {
		f.Add(marshal(f, req))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeSearchRequest(t, b) })
}
