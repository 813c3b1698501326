package engine_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// BenchmarkOneKey measures the engine's part of a unary read of one
// record by primary key, the record in the record cache: GetRecords and
// Query (its where, or the text filter "id == N"), without a transport.
func BenchmarkOneKey(b *testing.B) {
	te := newEngine(b)
	const n = 1000
	recs := make([]*anypb.Any, 0, n)
	for id := range n {
		recs = append(recs, te.Rec("shop.User", fmt.Sprintf(`{"id":%d,"name":"n%d","email":"%d@x"}`, id, id, id)))
	}
	te.MustWrite(engine.OpInsert, recs)
	ctx := b.Context()
	b.Run("get", func(b *testing.B) {
		reqs := make([]*pb.GetRequest, n)
		for i := range reqs {
			reqs[i] = &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{structpb.NewNumberValue(float64(i))}}
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			resp, h, err := te.E.GetRecords(ctx, reqs[i%n], 0)
			if err != nil || len(resp.Records) != 1 {
				b.Fatal(err)
			}
			h.Release()
		}
	})
	for _, c := range []struct {
		name  string
		query func(id int) *pb.Query
	}{
		{"query", lookup},
		{"query-filter", func(id int) *pb.Query { return &pb.Query{Type: "shop.User", Filter: fmt.Sprintf("id == %d", id)} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			reqs := make([]*pb.QueryRequest, n)
			for i := range reqs {
				reqs[i] = &pb.QueryRequest{Query: c.query(i)}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				resp, h, err := te.E.Query(ctx, reqs[i%n], 0)
				if err != nil || len(resp.Records) != 1 {
					b.Fatal(err)
				}
				h.Release()
			}
		})
	}
}
