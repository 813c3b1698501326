package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

func userLookup(id int64) *pb.Query {
	return &pb.Query{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
		Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: id}}}}}}
}

// Requests of plain primary-key lookups, which the server reads from
// their bytes and answers in bytes it writes itself, get the stored
// records, and completions for the keys that have none.
func TestSearchLookupsFromBytes(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	var recs []*anypb.Any
	for id := 1; id <= 5; id++ {
		recs = append(recs, ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": "n%d", "email": "%d@x"}`, id, id, id)))
	}
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, recs)
	st, err := ts.C.API().Search(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 { // the second from the record cache
		var qs []*pb.Query
		for id := int64(1); id <= 7; id++ {
			qs = append(qs, userLookup(id))
		}
		if err := st.Send(&pb.SearchRequest{Queries: qs}); err != nil {
			t.Fatal(err)
		}
		found := map[uint64][]byte{}
		done := map[uint64]uint64{}
		for len(done) < len(qs) {
			resp, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range resp.Results {
				for _, a := range b.Records {
					found[b.Query-uint64(7*round)] = a.Value
				}
			}
			for _, d := range resp.Done {
				done[d.Query-uint64(7*round)] = d.Count
			}
		}
		for i := range uint64(7) {
			want := uint64(0)
			if i < 5 {
				want = 1
				if !proto.Equal(&anypb.Any{Value: found[i]}, &anypb.Any{Value: recs[i].Value}) {
					t.Fatalf("round %d query %d: record %x, stored %x", round, i, found[i], recs[i].Value)
				}
			}
			if done[i] != want {
				t.Fatalf("round %d query %d: count %d, want %d", round, i, done[i], want)
			}
		}
	}
}

// A request of more lookups than MaxSearchQueries is refused, as any
// other request is.
func TestSearchLookupsOverQueryLimit(t *testing.T) {
	ts := startServer(t, server.Config{MaxSearchQueries: 10})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	// Were the lookups run, the stream would wait for more requests.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := ts.C.API().Search(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var qs []*pb.Query
	for id := range int64(11) {
		qs = append(qs, userLookup(id))
	}
	_ = st.Send(&pb.SearchRequest{Queries: qs})
	for err == nil {
		_, err = st.Recv()
	}
	wantCode(t, err, codes.InvalidArgument, "more than the server's limit of 10")
}

// A request shaped as lookups that does not decode (a type URL with
// invalid UTF-8 that still names shop.User) ends the stream with
// INVALID_ARGUMENT, after the answers to the lookups before it.
func TestMalformedLookupRequest(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st := rawStream(ctx, t, ts, "Search")
	good, _ := proto.Marshal(&pb.SearchRequest{Queries: []*pb.Query{userLookup(1), userLookup(2)}})
	where, _ := proto.Marshal(userLookup(1).Where)
	q := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff/shop.User")
	q = protowire.AppendBytes(protowire.AppendTag(q, 2, protowire.BytesType), where)
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), q)
	for _, m := range [][]byte{good, bad} {
		if err := st.SendMsg(&m); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
	}
	done := 0
	for {
		resp := new(pb.SearchResponse)
		err := st.RecvMsg(resp)
		if err != nil {
			if s := status.Convert(err); s.Code() != codes.InvalidArgument {
				t.Fatalf("stream ended with %v: %v, want INVALID_ARGUMENT", s.Code(), s.Message())
			}
			break
		}
		done += len(resp.Done)
	}
	if done != 2 {
		t.Fatalf("%d of the 2 lookups before the malformed request answered", done)
	}
}
