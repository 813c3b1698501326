package watch

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
)

// BenchmarkWatchers runs the experiment's run (durable ingest at batch
// 1,000 for one second while N watchers watch) once per iteration against
// an embedded syncing server on a fresh store, so that it can be profiled with -cpuprofile:
//
//	go test -run '^$' -bench 'Watchers/watchers=10' -benchtime 3x -cpuprofile cpu.out ./bench/watch/
//
// It reports the last iteration's rates and latencies, not ns/op, and
// cpu-ns/record: the process's CPU time (user and system: server, writer
// and watchers together) per record written, over every iteration. On a
// machine shared with other work the rates swing with the load, while
// the CPU a record costs moves much less, so the difference between
// watchers=0 and watchers=1 is the clearest measure of what one watcher
// costs.
func BenchmarkWatchers(b *testing.B) {
	for _, n := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			g := &Experiment{Batch: 1000}
			var o *outcome
			var cpu time.Duration
			var records int64
			for b.Loop() {
				// A fresh store each time, as the experiment's runs
				// have: the flushes and compactions due after one
				// iteration end with its server, outside the CPU
				// counted.
				b.StopTimer()
				t, err := bench.StartTarget(ctx, "", bench.TargetConfig{})
				if err != nil {
					b.Fatal(err)
				}
				if err := t.EnsureSchema(ctx, bench.ItemSchema()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				before := processCPU(b)
				if o, err = g.run(ctx, t, n, time.Second); err != nil {
					b.Fatal(err)
				}
				cpu += processCPU(b) - before
				records += o.records
				b.StopTimer()
				if err := t.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(o.ingestRate(), "records/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(records), "cpu-ns/record")
			if n > 0 {
				b.ReportMetric(median(o.delivered), "changes/s/watcher")
				b.ReportMetric(o.lat.quantile(0.99), "p99-ms")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// processCPU is the CPU time the process has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
