package grpc

import (
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/grpcbuf"
	"github.com/protobase/protobase/internal/wire"
)

func cmpQuery(typ, field string, op pb.Op, v *pb.Value) *pb.Query {
	return &pb.Query{Type: typ, Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: field, Op: op, Value: v}}}}
}

// searchSeeds are requests of the common shape and of others.
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
		if err := wire.DecodeSearchRequest(data, &r, nil); err != nil {
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

// putCounter is a release pool that counts its Puts.
type putCounter struct{ puts int }

func (p *putCounter) Get(size int) *[]byte { b := make([]byte, size); return &b }
func (p *putCounter) Put(*[]byte)          { p.puts++ }

// A held response sent as bytes (a Search response written as wire
// bytes) marshals to its bytes followed by the release buffer, which is
// freed, and its pool's Put called, once those bytes are; and it does so
// without an allocation, however small the response: its copy is a pooled
// buffer, the release buffer and the slice of both live in the Held.
func TestCodecHeldFrame(t *testing.T) {
	for _, size := range []int{150, 64 << 10} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i)
		}
		var pool putCounter
		h := &grpcbuf.Held{Msg: &grpcbuf.Frame{B: msg}, Pool: &pool}
		out, err := Codec{}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); string(got) != string(msg) {
			t.Fatalf("%d bytes: marshalled %d bytes, not the frame's", size, len(got))
		}
		out.Free()
		if pool.puts != 1 {
			t.Fatalf("%d bytes: %d Puts once freed, want 1", size, pool.puts)
		}
	}
	msg := make([]byte, 150)
	var pool putCounter
	allocs := testing.AllocsPerRun(100, func() {
		h := &grpcbuf.Held{Msg: &grpcbuf.Frame{B: msg}, Pool: &pool}
		out, err := Codec{}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		out.Free()
	})
	// The Held and its Frame are the caller's (in the server, one
	// allocation with the response's hold): 2 here.
	if allocs > 2 {
		t.Fatalf("%v allocations to make and marshal a small held frame, want 2", allocs)
	}
}
