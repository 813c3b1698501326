package watch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
)

// BenchmarkWatchers runs the experiment's run (durable ingest at batch
// 1,000 for one second while N watchers watch) once per iteration against
// an embedded syncing server, so that it can be profiled with -cpuprofile:
//
//	go test -run '^$' -bench 'Watchers/watchers=10' -benchtime 3x -cpuprofile cpu.out ./bench/watch/
//
// It reports the last iteration's rates and latencies, not ns/op.
func BenchmarkWatchers(b *testing.B) {
	for _, n := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			t, err := bench.StartTarget(ctx, "", bench.TargetConfig{})
			if err != nil {
				b.Fatal(err)
			}
			defer t.Close()
			if err := t.EnsureSchema(ctx, bench.ItemSchema()); err != nil {
				b.Fatal(err)
			}
			g := &Experiment{Batch: 1000}
			var o *outcome
			for b.Loop() {
				if o, err = g.run(ctx, t, n, time.Second); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(o.ingestRate(), "records/s")
			if n > 0 {
				b.ReportMetric(median(o.delivered), "changes/s/watcher")
				b.ReportMetric(o.lat.quantile(0.99), "p99-ms")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
