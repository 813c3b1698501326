package engine_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// TestIndexRangeScatteredVersions reads, by an index, records scattered
// over the key space (each tag on about one record in thirty, so that
// their lookups seek and turn to point reads), some of them updated since
// they were written, and finds each with the bytes and the version a Get
// of its key returns: the point reads answer as the walk does.
func TestIndexRangeScatteredVersions(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"rp.proto": repeatedTagIndexProto})
	rnd := rand.New(rand.NewPCG(7, 8))
	const n, values = 3000, 300
	doc := func(id int) *anypb.Any { return tagDoc(rnd, id, values) }
	var recs []*anypb.Any
	for id := range n {
		recs = append(recs, doc(id))
	}
	te.MustWrite(engine.OpInsert, recs)
	if err := te.St.Flush(); err != nil {
		t.Fatal(err)
	}
	recs = recs[:0]
	for id := 0; id < n; id += 7 {
		recs = append(recs, doc(id))
	}
	te.MustWrite(engine.OpUpdate, recs)

	ctx := t.Context()
	for k := range 20 {
		tag := "tag" + strconv.Itoa(k*13%values)
		resp, h, err := te.E.Query(ctx, &pb.QueryRequest{Query: &pb.Query{Type: "rp.Doc", Versions: true,
			Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "tags", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_String_{String_: tag}}}}},
		}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Records) < 20 || len(resp.Versions) != len(resp.Records) {
			t.Fatalf("%s: %d records, %d versions", tag, len(resp.Records), len(resp.Versions))
		}
		keys := make([]*structpb.Value, len(resp.Records))
		for i, r := range resp.Records {
			id, n := protowire.ConsumeVarint(r.Value[1:])
			if n < 0 {
				t.Fatalf("%s: record %d: no id", tag, i)
			}
			keys[i] = structpb.NewNumberValue(float64(id))
		}
		h.Release()
		got, h, err := te.E.GetRecords(ctx, &pb.GetRequest{Type: "rp.Doc", Keys: keys, Versions: true}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Records) != len(resp.Records) || !slices.Equal(got.Versions, resp.Versions) {
			t.Fatalf("%s: the index range's versions %v, a Get's %v", tag, resp.Versions, got.Versions)
		}
		for i, r := range resp.Records {
			if string(r.Value) != string(got.Records[i].Value) {
				t.Fatalf("%s: record %d differs from a Get's", tag, i)
			}
		}
		h.Release()
	}
}
