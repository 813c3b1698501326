package batching

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
)

// BenchmarkLookup runs the experiment's workloads (client and embedded
// server in one process) so that a CPU profile covers both:
//
//	go test -run '^$' -bench Lookup -cpuprofile cpu.out ./bench/batching/
//
// Each iteration is 100 ms of the alternating workload; queries/s is the
// figure the lab reports, cpu-ns/query the process's CPU time per query.
func BenchmarkLookup(b *testing.B) {
	const records = 100000
	t := labtest.Target(b, bench.TargetConfig{})
	if err := t.EnsureSchema(b.Context(), bench.ItemSchema()); err != nil {
		b.Fatal(err)
	}
	if err := t.LoadItems(b.Context(), nil, records); err != nil {
		b.Fatal(err)
	}
	raw, err := startRaw()
	if err != nil {
		b.Fatal(err)
	}
	defer raw.close()
	for _, batch := range []int{1, 100, 1000} {
		frames, err := bench.SearchFrames(batch, records)
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{"lookup", "transport", "raw"} {
			open := bench.OpenSearch(t.API.Search)
			switch mode {
			case "transport":
				open = t.Lab.Echo
			case "raw":
				open = raw.open
			}
			b.Run(fmt.Sprintf("%s/batch=%d", mode, batch), func(b *testing.B) {
				var ctr bench.SearchCounter
				w := bench.AlternateSearch(open, frames, batch, bench.SearchCheck{Records: 1}, &ctr)
				// Warm up as the lab does (the record cache fills).
				if _, err := w(b.Context(), 500*time.Millisecond); err != nil {
					b.Fatal(err)
				}
				var ops int64
				var took time.Duration
				cpu0 := processCPU(b)
				for b.Loop() {
					c, err := w(b.Context(), 100*time.Millisecond)
					if err != nil {
						b.Fatal(err)
					}
					ops += c.Ops
					took += c.Elapsed
				}
				b.ReportMetric(float64(ops)/took.Seconds(), "queries/s")
				// CPU time per query (client and server together) holds
				// still on a machine that other work keeps busy, where
				// queries/s does not.
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(ops), "cpu-ns/query")
			})
		}
	}
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
