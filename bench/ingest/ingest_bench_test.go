package ingest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
)

// BenchmarkLabIngest runs the lab's own insert loop (bench.InsertStream,
// the Write stream with its acknowledgement window) against an embedded
// syncing server, b.N records in batches of 1,000, so that the lab's path
// can be profiled with -cpuprofile and set beside
// server.BenchmarkIngest, which streams pre-built batches over Insert.
func BenchmarkLabIngest(b *testing.B) {
	for _, indexes := range []int{0, 2} {
		b.Run(fmt.Sprintf("indexes=%d", indexes), func(b *testing.B) {
			ctx := context.Background()
			t := labtest.ItemTarget(b, bench.TargetConfig{})
			typ := bench.ItemType
			if indexes == 2 {
				typ = bench.IndexedItemType
			}
			const batch = 1000
			var next int64
			w := bench.InsertStream(t, batch, bench.ItemWireBytes, func(buf []byte) ([]byte, int64) {
				first := next
				next += batch
				return bench.AppendWriteRecords(buf, 2, typ, first, batch)
			}, func(int64) bool { return next < int64(b.N) }, nil)
			b.ResetTimer()
			c, err := w(ctx, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(c.Ops)/c.Elapsed.Seconds(), "records/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
