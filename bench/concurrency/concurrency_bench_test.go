package concurrency

import (
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
)

// BenchmarkCounter runs the counter workload (16 clients, one key) on an
// embedded server for about b.N operations: add patches, and whole-record
// updates for comparison. Profile it with -cpuprofile.
func BenchmarkCounter(b *testing.B) {
	for _, set := range []bool{false, true} {
		name := "add"
		if set {
			name = "update"
		}
		b.Run(name, func(b *testing.B) {
			t := labtest.Target(b, bench.TargetConfig{})
			if err := t.EnsureSchema(b.Context(), schema()); err != nil {
				b.Fatal(err)
			}
			c, err := newCounter(b.Context(), t)
			if err != nil {
				b.Fatal(err)
			}
			g := &Experiment{Clients: 16}
			w := g.counter(t, c, set)
			b.ResetTimer()
			// About b.N operations at the rate of a short first run.
			n, err := w(b.Context(), 200*time.Millisecond)
			if err != nil {
				b.Fatal(err)
			}
			per := n.Elapsed / time.Duration(max(n.Ops, 1))
			if rest := time.Duration(b.N)*per - n.Elapsed; rest > 0 {
				m, err := w(b.Context(), rest)
				if err != nil {
					b.Fatal(err)
				}
				n.Ops, n.Elapsed = n.Ops+m.Ops, n.Elapsed+m.Elapsed
			}
			b.ReportMetric(float64(n.Ops)/n.Elapsed.Seconds(), "ops/s")
			if !set {
				if err := c.check(b.Context(), t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
