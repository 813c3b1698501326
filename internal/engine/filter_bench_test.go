package engine_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/textfilter"
)

// benchUsers is an engine holding users 1..n.
func benchUsers(b *testing.B, n int) *testEngine {
	te := newEngine(b)
	recs := make([]*anypb.Any, 0, 1000)
	for id := 1; id <= n; id++ {
		recs = append(recs, te.Rec("shop.User", fmt.Sprintf(`{"id": %d, "name": "user%d", "email": "u%d@x"}`, id, id, id)))
		if len(recs) == cap(recs) || id == n {
			te.MustWrite(engine.OpInsert, recs)
			recs = recs[:0]
		}
	}
	return te
}

// BenchmarkQueryFilter runs the same Query with its filter as a tree and
// as text, for a primary-key lookup and for an index range of 10 records:
// what parsing on the server costs a query.
func BenchmarkQueryFilter(b *testing.B) {
	te := benchUsers(b, 10000)
	for _, c := range []struct{ name, text string }{
		{"pk_point", `id = 5000`},
		{"index_range", `name prefix "user500" and id < 6000`},
	} {
		tree, err := textfilter.Parse(c.text)
		if err != nil {
			b.Fatal(err)
		}
		for _, form := range []string{"tree", "text"} {
			q := &pb.Query{Type: "shop.User", Where: tree}
			if form == "text" {
				q = &pb.Query{Type: "shop.User", Filter: c.text}
			}
			b.Run(c.name+"/"+form, func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					if _, err := query(te.E, b.Context(), &pb.QueryRequest{Query: q}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkGetRecords reads 1,000 keys in one Get, as JSON values and as
// key records, beside a Query of the same keys with IN.
func BenchmarkGetRecords(b *testing.B) {
	te := benchUsers(b, 10000)
	const n = 1000
	json := &pb.GetRequest{Type: "shop.User"}
	recs := &pb.GetRequest{Type: "shop.User"}
	in := &pb.Comparison{Field: "id", Op: pb.Op_OP_IN}
	for i := range n {
		id := 1 + i*10
		json.Keys = append(json.Keys, structpb.NewNumberValue(float64(id)))
		recs.KeyRecords = append(recs.KeyRecords, te.Rec("shop.User", fmt.Sprintf(`{"id": %d}`, id)))
		in.Values = append(in.Values, &pb.Value{Kind: &pb.Value_Int{Int: int64(id)}})
	}
	for _, req := range []struct {
		name string
		r    *pb.GetRequest
	}{{"json", json}, {"records", recs}} {
		b.Run(req.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				resp, err := getRecords(te.E, b.Context(), req.r)
				if err != nil || len(resp.Records) != n {
					b.Fatal(resp, err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "keys/s")
		})
	}
	b.Run("query_in", func(b *testing.B) {
		q := &pb.QueryRequest{Query: &pb.Query{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: in}}}, PageSize: n}
		b.ReportAllocs()
		for range b.N {
			resp, err := query(te.E, b.Context(), q)
			if err != nil || len(resp.Records) != n {
				b.Fatal(len(resp.GetRecords()), err)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "keys/s")
	})
}
