package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// encodeSeeds are requests AppendSearchRequest writes and requests it
// leaves to proto.Marshal.
func encodeSeeds() []*pb.SearchRequest {
	reqs := searchSeeds()
	for _, q := range querySeeds() {
		reqs = append(reqs, &pb.SearchRequest{Queries: []*pb.Query{q}})
	}
	versions := cmpQuery("shop.User", "id", pb.Op_OP_EQ, intValue(1))
	versions.Versions = true
	unknown := cmpQuery("shop.User", "id", pb.Op_OP_EQ, intValue(1))
	unknown.Where.GetCmp().Value.ProtoReflect().SetUnknown([]byte{0x78, 0x01})
	return append(reqs,
		&pb.SearchRequest{Queries: []*pb.Query{versions, {Type: "shop.User", Filter: "id = 1"}}},
		&pb.SearchRequest{Queries: []*pb.Query{unknown}},
		&pb.SearchRequest{Queries: []*pb.Query{cmpQuery("shop.\xff", "id", pb.Op_OP_EQ, intValue(1))}},
		&pb.SearchRequest{Queries: []*pb.Query{cmpQuery("t", "s", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_String_{String_: "\xc3"}})}},
		&pb.SearchRequest{Queries: []*pb.Query{cmpQuery("t", "v", pb.Op_OP_EQ, &pb.Value{})}},
		&pb.SearchRequest{Queries: []*pb.Query{{Type: "t", Where: &pb.Expr{Expr: &pb.Expr_Cmp{}}}}},
		&pb.SearchRequest{Queries: []*pb.Query{cmpQuery("t", "v", pb.Op(-1), intValue(-1))}},
	)
}

// checkEncodeSearchRequest fails unless AppendSearchRequest writes what
// proto.Marshal writes for m, and declines what it does not write or
// proto.Marshal refuses. It reports whether m was written by hand.
func checkEncodeSearchRequest(t *testing.T, m *pb.SearchRequest) bool {
	t.Helper()
	want, werr := proto.Marshal(m)
	size, ok := SizeSearchRequest(m)
	if !ok {
		return false
	}
	if werr != nil {
		t.Fatalf("written by hand, refused by proto.Marshal (%v): %v", werr, m)
	}
	got := AppendSearchRequest([]byte("x"), m)[1:]
	if !bytes.Equal(got, want) || size != len(want) {
		t.Fatalf("%v:\n by hand %x (size %d)\n proto   %x", m, got, size, want)
	}
	return true
}

func TestEncodeSearchRequest(t *testing.T) {
	hand := 0
	for _, m := range encodeSeeds() {
		if checkEncodeSearchRequest(t, m) {
			hand++
		}
	}
	if hand < 10 {
		t.Fatalf("%d seeds written by hand", hand)
	}
	// Requests of random lookups: every operand kind and size, the flags.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var m pb.SearchRequest
		for range rng.IntN(4) {
			q := cmpQuery("shop.User", "id", pb.Op(rng.IntN(12)), nil)
			switch rng.IntN(6) {
			case 0:
				q.Where.GetCmp().Value = intValue(rng.Int64() >> rng.IntN(64))
			case 1:
				q.Where.GetCmp().Value = &pb.Value{Kind: &pb.Value_Uint{Uint: rng.Uint64() >> rng.IntN(64)}}
			case 2:
				q.Where.GetCmp().Value = &pb.Value{Kind: &pb.Value_Bool{Bool: rng.IntN(2) == 0}}
			case 3:
				q.Where.GetCmp().Value = &pb.Value{Kind: &pb.Value_String_{String_: string(make([]byte, rng.IntN(300)))}}
			case 4:
				q.Where.GetCmp().Value = &pb.Value{Kind: &pb.Value_Bytes{Bytes: make([]byte, rng.IntN(300))}}
			}
			q.Limit = uint64(rng.IntN(3)) << rng.IntN(60)
			q.KeysOnly, q.Explain, q.Count, q.Versions = rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(2) == 0
			m.Queries = append(m.Queries, q)
		}
		if !checkEncodeSearchRequest(t, &m) {
			t.Fatalf("declined %v", &m)
		}
	}
}
