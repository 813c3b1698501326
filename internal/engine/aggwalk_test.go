package engine_test

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// TestAggregateWireShapes aggregates records whose bytes take the shapes
// the field walk must read as record.Path.Get does: a field repeated on
// the wire (the last value wins), multi-byte lengths and varints, -0 and 0
// and NaNs of different payloads as one group each, and fields it skips.
func TestAggregateWireShapes(t *testing.T) {
	long := strings.Repeat("t", 300)
	rec := func(id uint64, team string, ratio uint64, scores ...int64) *anypb.Any {
		v := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), id)
		if team != "" {
			v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), team)
		}
		for _, s := range scores {
			v = protowire.AppendVarint(protowire.AppendTag(v, 4, protowire.VarintType), uint64(s))
		}
		v = protowire.AppendFixed64(protowire.AppendTag(v, 6, protowire.Fixed64Type), ratio)
		v = protowire.AppendVarint(protowire.AppendTag(v, 5, protowire.VarintType), 1<<50)
		inner := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), long)
		v = protowire.AppendBytes(protowire.AppendTag(v, 12, protowire.BytesType), inner)
		// Varints of two and three bytes, the last one ending the record.
		v = protowire.AppendVarint(protowire.AppendTag(v, 3, protowire.VarintType), 300)
		v = protowire.AppendVarint(protowire.AppendTag(v, 3, protowire.VarintType), 70_000+id)
		return &anypb.Any{TypeUrl: "type.googleapis.com/ag.Row", Value: v}
	}
	recs := []*anypb.Any{
		rec(1, "x", math.Float64bits(0), 3),
		rec(2, "x", math.Float64bits(math.Copysign(0, -1)), 3, 7),
		rec(3, long, 0x7ff8000000000001, -1<<40),
		rec(4, long, 0x7ff8000000000002, 5),
		rec(5, "", math.Float64bits(1.5), 11, -2, 13),
	}
	aggStores(t, engine.Options{}, func(t *testing.T, ae *aggEngine) {
		w := ae.e.NewWriter()
		defer w.Close()
		if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		fns := []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}, {Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"}}
		for _, c := range []struct {
			by   string
			want [][3]any // group, count, sum
		}{
			{"ratio", [][3]any{{"NaN", 2.0, float64(5 - 1<<40)}, {0.0, 2.0, 10.0}, {1.5, 1.0, 13.0}}},
			{"team", [][3]any{{"", 1.0, 13.0}, {long, 1.0 * 2, float64(5 - 1<<40)}, {"x", 2.0, 10.0}}},
			{"level", [][3]any{{70_001.0, 1.0, 3.0}, {70_002.0, 1.0, 7.0}, {70_003.0, 1.0, float64(-1 << 40)}, {70_004.0, 1.0, 5.0}, {70_005.0, 1.0, 13.0}}},
		} {
			resp, err := ae.aggregate("", &pb.Aggregate{GroupBy: []string{c.by}, Functions: fns})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Rows) != len(c.want) {
				t.Fatalf("by %s: %v", c.by, resp.Rows)
			}
			for i, w := range c.want {
				r := resp.Rows[i]
				got := [3]any{r.Group[0].AsInterface(), r.Values[0].AsInterface(), r.Values[1].AsInterface()}
				if got != w {
					t.Errorf("by %s row %d: got %v, want %v", c.by, i, got, w)
				}
			}
		}
	})
}
