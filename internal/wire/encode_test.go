package wire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func randomRecords(r *rand.Rand) []*anypb.Any {
	var recs []*anypb.Any
	for range r.IntN(4) {
		a := &anypb.Any{Value: make([]byte, r.IntN(300))}
		if r.IntN(5) > 0 {
			a.TypeUrl = "type.googleapis.com/shop.User"
		}
		recs = append(recs, a)
	}
	return recs
}

func randomValue(r *rand.Rand) uint64 {
	switch r.IntN(3) {
	case 0:
		return 0
	case 1:
		return uint64(r.IntN(200))
	}
	return r.Uint64()
}

// The hand encoders write exactly what the generated code writes, for
// the shapes they cover and (by handing over) for the others.
func TestEncodeMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var msgs []proto.Message
	for range 500 {
		m := &pb.SearchResponse{}
		for range r.IntN(4) {
			m.Results = append(m.Results, &pb.ResultBatch{Query: randomValue(r), Records: randomRecords(r)})
		}
		for range r.IntN(4) {
			m.Done = append(m.Done, &pb.QueryDone{Query: randomValue(r), Count: randomValue(r)})
		}
		msgs = append(msgs, m)
		msgs = append(msgs, &pb.ScanResponse{Records: randomRecords(r), Count: randomValue(r), Done: r.IntN(2) == 0})
		get := &pb.GetResponse{Records: randomRecords(r)}
		for range r.IntN(3) {
			get.Missing = append(get.Missing, uint32(randomValue(r)))
			get.Unanswered = append(get.Unanswered, uint32(randomValue(r)))
			get.Versions = append(get.Versions, randomValue(r))
		}
		msgs = append(msgs, get, &pb.QueryResponse{Records: randomRecords(r), Count: randomValue(r), Versions: get.Versions,
			NextPageToken: strings.Repeat("t", r.IntN(3)*100)})
	}
	// Shapes left to the generated code.
	msgs = append(msgs,
		&pb.SearchResponse{Errors: []*pb.QueryError{{Query: 3, Code: 5, Message: "no"}}},
		&pb.SearchResponse{Done: []*pb.QueryDone{{Query: 1, Plan: &pb.Plan{}}}},
		&pb.SearchResponse{Results: []*pb.ResultBatch{{Query: 1, Plan: &pb.Plan{}}}},
		&pb.ScanResponse{Plan: &pb.Plan{}, Done: true},
		&pb.ScanResponse{Records: []*anypb.Any{{TypeUrl: "bad\xff"}}},
		&pb.GetResponse{Missing: []uint32{0}, MissingKeys: []*structpb.Value{structpb.NewNumberValue(1)}},
		&pb.GetResponse{Missing: []uint32{0}, MissingKeyRecords: []*anypb.Any{{TypeUrl: "u"}}},
		&pb.QueryResponse{Plan: &pb.Plan{}},
		&pb.QueryResponse{Rows: []*pb.AggregateRow{{}}},
		&pb.QueryResponse{NextPageToken: "\xff"},
	)
	for i, m := range msgs {
		want, wantErr := proto.Marshal(m)
		got, ok := marshalHand(m)
		if !ok {
			continue // left to the generated code
		}
		if wantErr != nil {
			t.Fatalf("message %d: encoded by hand, generated code's error %v", i, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("message %d (%v):\n got %x\nwant %x", i, m, got, want)
		}
	}
}

// The hand encoders at the edges: empty messages and records, zero and
// largest numbers, lengths at each varint boundary, a record of 2 MiB,
// unknown fields at the top (left to the generated code, which keeps
// them), type URLs of invalid UTF-8 (left to it, which refuses them).
func TestEncodeEdges(t *testing.T) {
	rec := func(url string, n int) *anypb.Any {
		return &anypb.Any{TypeUrl: url, Value: bytes.Repeat([]byte{0x08}, n)}
	}
	var recs []*anypb.Any
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 2 << 20} {
		recs = append(recs, rec("type.googleapis.com/shop.User", n), rec("", n))
	}
	recs = append(recs, &anypb.Any{}, &anypb.Any{TypeUrl: strings.Repeat("u", 200)})
	unknown := &pb.SearchResponse{}
	unknown.ProtoReflect().SetUnknown([]byte{0x78, 0x01})
	unknownValue := &pb.Value{Kind: &pb.Value_Int{Int: 1}}
	unknownValue.ProtoReflect().SetUnknown([]byte{0x78, 0x01})
	unknownScan := &pb.ScanResponse{Count: 1}
	unknownScan.ProtoReflect().SetUnknown([]byte{0x78, 0x01})
	for _, tc := range []struct {
		m    proto.Message
		hand bool // the hand encoder takes it
	}{
		{&pb.SearchResponse{}, true},
		{&pb.ScanResponse{}, true},
		{&pb.SearchResponse{Results: []*pb.ResultBatch{{}}, Done: []*pb.QueryDone{{}}}, true},
		{&pb.SearchResponse{Results: []*pb.ResultBatch{{Query: math.MaxUint64, Records: recs}}, Done: []*pb.QueryDone{{Query: math.MaxUint64, Count: math.MaxUint64}}}, true},
		{&pb.ScanResponse{Records: recs, Count: math.MaxUint64, Done: true}, true},
		{&pb.ScanResponse{Records: []*anypb.Any{{}}}, true},
		{&pb.GetResponse{}, true},
		{&pb.GetResponse{Records: recs, Missing: []uint32{0, math.MaxUint32}, Unanswered: []uint32{127, 128}, Versions: []uint64{0, math.MaxUint64}}, true},
		{&pb.GetResponse{Records: []*anypb.Any{{TypeUrl: "a\xffb"}}}, false},
		{&pb.QueryRequest{}, true},
		{&pb.QueryRequest{Query: &pb.Query{}, PageSize: math.MaxUint32, PageToken: strings.Repeat("t", 130)}, true},
		{&pb.QueryRequest{Query: &pb.Query{Type: "bench.Item", Where: &pb.Expr{}, Limit: math.MaxUint64, KeysOnly: true, Explain: true, Count: true, Versions: true}}, true},
		{cmpRequest(pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Int{Int: math.MinInt64}}), true},
		{cmpRequest(pb.Op(-1), &pb.Value{Kind: &pb.Value_Int{}}), true},
		{cmpRequest(pb.Op_OP_GE, &pb.Value{Kind: &pb.Value_Uint{Uint: math.MaxUint64}}), true},
		{cmpRequest(pb.Op_OP_LT, &pb.Value{Kind: &pb.Value_Double{Double: math.Copysign(0, -1)}}), true},
		{cmpRequest(pb.Op_OP_NE, &pb.Value{Kind: &pb.Value_Bool{}}), true},
		{cmpRequest(pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_String_{String_: ""}}), true},
		{cmpRequest(pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Bytes{Bytes: make([]byte, 200)}}), true},
		{cmpRequest(pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Enum{Enum: "RED"}}), true},
		{cmpRequest(pb.Op_OP_EQ, &pb.Value{}), true},
		{cmpRequest(pb.Op_OP_EQ, nil), true},
		{cmpRequest(pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_String_{String_: "\xff"}}), false},
		{cmpRequest(pb.Op_OP_EQ, unknownValue), false},
		{&pb.QueryRequest{Query: &pb.Query{Type: "t", Filter: "id > 1"}}, false},
		{&pb.QueryRequest{Query: &pb.Query{Type: "t", Order: &pb.Order{}}}, false},
		{&pb.QueryRequest{Query: &pb.Query{Type: "t", Where: &pb.Expr{Expr: &pb.Expr_Not{Not: &pb.Expr{}}}}}, false},
		{&pb.QueryRequest{Query: &pb.Query{Type: "t", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id", Values: []*pb.Value{{}}}}}}}, false},
		{&pb.QueryRequest{PageToken: "\xff"}, false},
		{&pb.GetRequest{}, true},
		{&pb.GetRequest{Type: "bench.Item", Keys: []*structpb.Value{structpb.NewNumberValue(0), structpb.NewNumberValue(math.Inf(1)), structpb.NewNumberValue(-1 << 53),
			structpb.NewStringValue(""), structpb.NewStringValue(strings.Repeat("k", 200)), structpb.NewBoolValue(false), structpb.NewBoolValue(true), {}}, Versions: true}, true},
		{&pb.GetRequest{Type: "t", Keys: []*structpb.Value{structpb.NewStringValue("\xff")}}, false},
		{&pb.GetRequest{Type: "\xff"}, false},
		{&pb.GetRequest{Type: "t", Keys: []*structpb.Value{structpb.NewNullValue()}}, false},
		{&pb.GetRequest{Type: "t", Keys: []*structpb.Value{nil}}, false},
		{&pb.GetRequest{Type: "t", KeyRecords: []*anypb.Any{{TypeUrl: "u"}}}, false},
		{&pb.QueryResponse{}, true},
		{&pb.QueryResponse{Records: recs, NextPageToken: strings.Repeat("t", 200), Count: math.MaxUint64, Versions: []uint64{1 << 63}}, true},
		{&pb.QueryResponse{Records: []*anypb.Any{{TypeUrl: "a\xffb"}}}, false},
		{unknown, false},
		{unknownScan, false},
		{&pb.ScanResponse{Records: []*anypb.Any{{TypeUrl: "a\xffb"}}}, false},
		{&pb.SearchResponse{Results: []*pb.ResultBatch{{Records: []*anypb.Any{{TypeUrl: "\xc3"}}}}}, false},
		{&pb.SearchResponse{Errors: []*pb.QueryError{{}}}, false},
	} {
		got, ok := marshalHand(tc.m)
		if ok != tc.hand {
			t.Fatalf("%v: encoded by hand %v, want %v", tc.m, ok, tc.hand)
		}
		if !ok {
			continue
		}
		if want := marshal(t, tc.m); !bytes.Equal(got, want) {
			t.Fatalf("%v:\n got %x\nwant %x", tc.m, got, want)
		}
	}
}

// cmpRequest is a QueryRequest of one comparison of id with v.
func cmpRequest(op pb.Op, v *pb.Value) *pb.QueryRequest {
	return &pb.QueryRequest{Query: &pb.Query{Type: "bench.Item", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id", Op: op, Value: v}}}}}
}
