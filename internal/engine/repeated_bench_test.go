package engine_test

import (
	"flag"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// BenchmarkInsertTags inserts batches of 1,000 records of 10 tags each
// (drawn from 1,000 values) into rp.Doc with an index on the tags
// ("index": ten entries per record; "index20": tags drawn from 20 values,
// so that a batch's entries land in 20 runs; "index-scattered": the
// records' keys scattered instead of rising, so that no two of a batch's
// entries share a group) and without ("none"); the
// "-1k" pair does the same with records of about 1 KiB (a 900-byte note,
// YCSB's record size), where the records' own bytes weigh more beside
// their entries. The ratio of a pair's records/s is what the index costs
// ingest; run each
// sub-benchmark in turn (-bench 'BenchmarkInsertTags/index$', then
// '/none$', ...) to alternate them. records/cpu-s divides by the CPU time
// the process used meanwhile, the store's background flushes and
// compactions included: on a shared machine the wall clock also counts
// other processes' turns.
func BenchmarkInsertTags(b *testing.B) {
	for _, c := range []struct {
		name, proto  string
		values, note int
		scatter      bool
	}{
		{"index", repeatedTagIndexProto, 1000, 0, false}, {"index20", repeatedTagIndexProto, 20, 0, false},
		{"index-scattered", repeatedTagIndexProto, 1000, 0, true}, {"none", repeatedNoIndexProto, 1000, 0, false},
		{"index-1k", repeatedTagIndexProto, 1000, 900, false}, {"none-1k", repeatedNoIndexProto, 1000, 900, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			te := openEngine(b, b.TempDir(), engine.Options{})
			te.Apply(map[string]string{"rp.proto": c.proto})
			rnd := rand.New(rand.NewPCG(1, 2))
			id, note := 0, strings.Repeat("n", c.note)
			batch := func() []*anypb.Any {
				recs := make([]*anypb.Any, 1000)
				for i := range recs {
					id++
					key := id
					if c.scatter { // an odd multiplier permutes the ids below 2^40
						key = int(uint64(id) * 0x9E3779B97F4A7C15 & (1<<40 - 1))
					}
					var js strings.Builder
					js.WriteString(`{"id": ` + strconv.Itoa(key) + `, "team": "t` + strconv.Itoa(id%10) + `", "tags": [`)
					for k := range 10 {
						if k > 0 {
							js.WriteString(", ")
						}
						js.WriteString(`"tag` + strconv.Itoa(rnd.IntN(c.values)) + `"`)
					}
					js.WriteString(`], "note": "` + note + `"}`)
					recs[i] = te.Rec("rp.Doc", js.String())
				}
				return recs
			}
			batches := make([][]*anypb.Any, b.N)
			for i := range batches {
				batches[i] = batch()
			}
			w := te.E.NewWriter()
			defer w.Close()
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for _, recs := range batches {
				if err := w.Apply(b.Context(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := w.Sync(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(b.N*1000)/(cpuTime(b)-cpu0).Seconds(), "records/cpu-s")
		})
	}
}

var queryTagsBatches = flag.Int("querytags.batches", 300, "batches of 1,000 records BenchmarkQueryTags stores before it queries (at least 20, so that every tag fills a page of 100)")

// BenchmarkQueryTags reads the first page of a query by one tag ("tags =
// tagK", limit 1 and 100) from rp.Doc with an index on the tags, after
// -querytags.batches batches of 1,000 records of 10 tags drawn from 1,000
// values: what an index on a repeated field costs a read, which with a
// store much larger than a memtable is mostly the seek through the index
// instance's levels. The flag goes after the package:
//
//	go test ./internal/engine/ -run '^$' -bench QueryTags -querytags.batches=1500
func BenchmarkQueryTags(b *testing.B) {
	te := openEngine(b, b.TempDir(), engine.Options{})
	te.Apply(map[string]string{"rp.proto": repeatedTagIndexProto})
	rnd := rand.New(rand.NewPCG(1, 2))
	w := te.E.NewWriter()
	defer w.Close()
	for n := range *queryTagsBatches {
		recs := make([]*anypb.Any, 1000)
		for i := range recs {
			recs[i] = tagDoc(rnd, n*1000+i, 1000)
		}
		if err := w.Apply(b.Context(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Sync(); err != nil {
		b.Fatal(err)
	}
	for _, limit := range []uint64{1, 100} {
		b.Run("limit-"+strconv.FormatUint(limit, 10), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				req := &pb.QueryRequest{Query: &pb.Query{Type: "rp.Doc", Limit: limit, Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
					Field: "tags", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_String_{String_: "tag" + strconv.Itoa(i*7919%1000)}},
				}}}}}
				resp, h, err := te.E.Query(b.Context(), req, 0)
				if err != nil {
					b.Fatal(err)
				}
				if uint64(len(resp.Records)) != limit {
					b.Fatalf("%d records, want %d", len(resp.Records), limit)
				}
				h.Release()
			}
		})
	}
}
