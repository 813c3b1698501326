package engine_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// BenchmarkAggregate aggregates 1,000,000 ag.Row records (about 30 bytes
// each) without an index: group by team (10 groups), count, sum and avg of
// score, and the same with no grouping. Parts are read in parallel up to
// GOMAXPROCS (-cpu 1,2 compares); records/s/core divides by the parts the
// plan read, records/cpu-s by the CPU time the process used.
//
//	go test -run '^$' -bench BenchmarkAggregate -benchtime 10x -count 5 ./internal/engine/
func BenchmarkAggregate(b *testing.B) {
	const n = 1_000_000
	te := openEngine(b, b.TempDir(), engine.Options{})
	te.Apply(map[string]string{"ag.proto": aggProto})
	w := te.E.NewWriter()
	defer w.Close()
	for from := 0; from < n; from += 10_000 {
		recs := make([]*anypb.Any, 10_000)
		for i := range recs {
			id := from + i
			v := protowire.AppendTag(nil, 1, protowire.VarintType)
			v = protowire.AppendVarint(v, uint64(id))
			v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), "team"+strconv.Itoa(id%10))
			v = protowire.AppendVarint(protowire.AppendTag(v, 3, protowire.VarintType), uint64(id%4))
			v = protowire.AppendVarint(protowire.AppendTag(v, 4, protowire.VarintType), uint64(id%1000))
			recs[i] = &anypb.Any{TypeUrl: "type.googleapis.com/ag.Row", Value: v}
		}
		if err := w.Apply(b.Context(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := te.St.Compact(b.Context()); err != nil {
		b.Fatal(err)
	}
	// The first reads after the ingest compete with its last background
	// work and fill the block cache: they are not measured.
	for range 3 {
		if _, err := query(te.E, b.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "ag.Row", Count: true}}); err != nil {
			b.Fatal(err)
		}
	}
	fns := []*pb.AggregateFunction{
		{Op: pb.AggregateOp_AGGREGATE_OP_COUNT},
		{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"},
		{Op: pb.AggregateOp_AGGREGATE_OP_AVG, Field: "score"},
	}
	for _, c := range []struct {
		name    string
		groupBy []string
	}{{"all", nil}, {"team", []string{"team"}}} {
		b.Run(c.name, func(b *testing.B) {
			req := &pb.QueryRequest{Query: &pb.Query{Type: "ag.Row", Explain: true, Aggregate: &pb.Aggregate{GroupBy: c.groupBy, Functions: fns}}}
			var parts uint32
			cpu0 := cpuTime(b)
			for b.Loop() {
				resp, err := query(te.E, b.Context(), req)
				if err != nil {
					b.Fatal(err)
				}
				if got := resp.Rows[0].Values[0].GetNumberValue(); got != n/float64(max(1, len(resp.Rows))) {
					b.Fatalf("count %v", got)
				}
				parts = resp.Plan.GetParallelism()
			}
			cpu := cpuTime(b) - cpu0
			rate := float64(b.N) * n / b.Elapsed().Seconds()
			// On a shared machine the wall clock counts other processes'
			// turns; the process's CPU time does not (it does count the
			// store's background work, so it errs low).
			b.ReportMetric(float64(b.N)*n/cpu.Seconds(), "records/cpu-s")
			b.ReportMetric(rate, "records/s")
			b.ReportMetric(rate/float64(parts), "records/s/core")
			b.ReportMetric(float64(parts), "parts")
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
