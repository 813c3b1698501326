package engine_test

import (
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// aggBenchProto is ag.Row without its team index ("none"), and with one
// aggregate index by team summing score ("index").
var (
	aggBenchNone  = strings.Replace(aggProto, ` index: { fields: "team" }`, "", 1)
	aggBenchIndex = strings.Replace(aggProto, ` index: { fields: "team" }`, ` aggregate: { name: "by_team" group_by: "team" sum: "score" }`, 1)
)

// aggBenchRecords are records from..from+n of ag.Row (about 30 bytes),
// in 10 teams.
func aggBenchRecords(from, n int) []*anypb.Any {
	recs := make([]*anypb.Any, n)
	for i := range recs {
		id := from + i
		v := protowire.AppendTag(nil, 1, protowire.VarintType)
		v = protowire.AppendVarint(v, uint64(id))
		v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), "team"+strconv.Itoa(id%10))
		v = protowire.AppendVarint(protowire.AppendTag(v, 3, protowire.VarintType), uint64(id%4))
		v = protowire.AppendVarint(protowire.AppendTag(v, 4, protowire.VarintType), uint64(id%1000))
		recs[i] = &anypb.Any{TypeUrl: "type.googleapis.com/ag.Row", Value: v}
	}
	return recs
}

// BenchmarkAggregateIndex answers count, sum and avg of score by team (10
// groups) over 1,000,000 records from the aggregate index ("index") and,
// with a filter every record passes, by a scan ("scan"); ns/group is the
// time per group answered.
//
//	go test -run '^$' -bench BenchmarkAggregateIndex -benchtime 20x -count 5 ./internal/engine/
func BenchmarkAggregateIndex(b *testing.B) {
	const n = 1_000_000
	te := openEngine(b, b.TempDir(), engine.Options{})
	te.Apply(map[string]string{"ag.proto": aggBenchIndex})
	w := te.E.NewWriter()
	defer w.Close()
	for from := 0; from < n; from += 10_000 {
		if err := w.Apply(b.Context(), engine.Batch{Op: engine.OpInsert, Records: aggBenchRecords(from, 10_000)}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := te.St.Compact(b.Context()); err != nil {
		b.Fatal(err)
	}
	fns := []*pb.AggregateFunction{
		{Op: pb.AggregateOp_AGGREGATE_OP_COUNT},
		{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"},
		{Op: pb.AggregateOp_AGGREGATE_OP_AVG, Field: "score"},
	}
	for _, c := range []struct{ name, filter, plan string }{{"index", "", "aggregate index by_team"}, {"scan", "id >= 0", "pk_range"}} {
		b.Run(c.name, func(b *testing.B) {
			req := &pb.QueryRequest{Query: &pb.Query{Type: "ag.Row", Filter: c.filter, Explain: true,
				Aggregate: &pb.Aggregate{GroupBy: []string{"team"}, Functions: fns}}}
			groups := 0
			for b.Loop() {
				resp, err := query(te.E, b.Context(), req)
				if err != nil {
					b.Fatal(err)
				}
				if !strings.HasPrefix(resp.Plan.GetText(), c.plan) || resp.Rows[0].Values[0].GetNumberValue() != n/10 {
					b.Fatalf("plan %s, rows %v", resp.Plan.GetText(), resp.Rows[0])
				}
				groups = len(resp.Rows)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*groups), "ns/group")
		})
	}
}

// BenchmarkInsertAggregate inserts batches of 1,000 ag.Row records (10
// teams) with an aggregate index by team summing score ("index") and
// without ("none"). The ratio of their records/s is what the index costs
// ingest; run each sub-benchmark in its own process, alternately:
//
//	for r in 1 2 3 4 5; do for c in index none; do
//	  ./engine.test -test.run '^$' -test.bench "BenchmarkInsertAggregate/$c\$" -test.benchtime 200x
//	done; done
func BenchmarkInsertAggregate(b *testing.B) {
	for _, c := range []struct{ name, proto string }{{"index", aggBenchIndex}, {"none", aggBenchNone}} {
		b.Run(c.name, func(b *testing.B) {
			te := openEngine(b, b.TempDir(), engine.Options{})
			te.Apply(map[string]string{"ag.proto": c.proto})
			w := te.E.NewWriter()
			defer w.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				recs := aggBenchRecords(i*1000, 1000)
				b.StartTimer()
				if err := w.Apply(b.Context(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := w.Sync(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
