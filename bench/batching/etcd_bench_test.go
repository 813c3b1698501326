package batching

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
)

// BenchmarkLookupEtcd runs the "lookup etcd" and "bare etcd" workloads
// (the client, an embedded server on etcd and the bare etcd client in one
// process) so that a CPU profile shows what the server adds to a bare
// client's batched gets:
//
//	PROTOBASE_BENCH_ETCD=HOST:PORT,... go test -run '^$' -bench LookupEtcd -cpuprofile cpu.out ./bench/batching/
//
// Without PROTOBASE_BENCH_ETCD it starts one etcd member in the process
// (whose own work is then in the profile too). cpu-ns/query is the
// process's CPU time per query: the two modes' difference is the server's
// own cost when the cluster runs in other processes.
func BenchmarkLookupEtcd(b *testing.B) {
	const records = 100000
	opts := labtest.Options()
	if eps := os.Getenv("PROTOBASE_BENCH_ETCD"); eps != "" {
		opts.Etcd = server.EtcdConfig{Endpoints: strings.Split(eps, ",")}
	} else {
		opts.Etcd = server.EtcdConfig{Endpoints: []string{etcdtest.Start(b, etcdtest.Roomy)}}
	}
	env := labtest.Env(b, opts)
	t, err := env.Target(b.Context(), bench.TargetConfig{Etcd: env.Etcd})
	if err != nil {
		b.Fatal(err)
	}
	if err := t.LoadItems(b.Context(), nil, records); err != nil {
		b.Fatal(err)
	}
	bare, err := bench.OpenBareEtcd(env.Etcd)
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()
	keys, err := bare.RecordKeys(b.Context(), *t.Etcd, records)
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range []int{1, 100, 1000} {
		frames, err := bench.SearchFrames(batch, records)
		if err != nil {
			b.Fatal(err)
		}
		var ctr bench.SearchCounter
		b.Run(fmt.Sprintf("lookup/batch=%d", batch), func(b *testing.B) {
			measureEtcd(b, bench.AlternateSearch(t.API.Search, frames, batch, bench.SearchCheck{Records: 1}, &ctr))
		})
		b.Run(fmt.Sprintf("bare/batch=%d", batch), func(b *testing.B) { measureEtcd(b, bare.Lookups(keys, batch)) })
	}
}

// measureEtcd runs w for 100 ms an iteration after a warm-up, reporting
// queries/s and the process's CPU time per query.
func measureEtcd(b *testing.B, w bench.Workload) {
	if _, err := w(context.Background(), 200*time.Millisecond); err != nil {
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
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(ops), "cpu-ns/query")
}
