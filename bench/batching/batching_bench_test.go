package batching

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	"github.com/protobase/protobase/server"
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

// BenchmarkLookupLarge runs the lookup rows at batch 1,000 over
// $PROTOBASE_BENCH_RECORDS records (default 100,000), compacted after
// loading as the lab does, in the steady state: a warm-up reads every
// record once (for at most $PROTOBASE_BENCH_WARMUP, default 60s), and each
// 100 ms iteration continues with the frames after the previous one's.
// The iterations thus read the whole data set, where the lab's runs each
// start again at its first frames, which a record cache holding those
// frames serves. It reports the block cache's hits and misses per query
// beside the rate and the process's CPU per query:
//
//	PROTOBASE_BENCH_RECORDS=20000000 PROTOBASE_BENCH_DIR=/data/bench go test -run '^$' -bench LookupLarge -benchtime 30x -cpuprofile cpu.out ./bench/batching/
//
// With $PROTOBASE_BENCH_DIR set, the store is kept in a directory of its
// own there and reused by later runs over as many records, which skip the
// load (delete it when done); otherwise it is a temporary one.
// $PROTOBASE_BENCH_RECORD_CACHE_BYTES sets the server's record cache
// (server.Config.RecordCacheBytes; default: the server's).
func BenchmarkLookupLarge(b *testing.B) {
	records := 100000
	if v := os.Getenv("PROTOBASE_BENCH_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("PROTOBASE_BENCH_RECORDS=%q: want a positive count", v)
		}
		records = n
	}
	t, metrics := largeTarget(b, records)
	const batch = 1000
	frames, err := bench.SearchFrames(batch, records)
	if err != nil {
		b.Fatal(err)
	}
	var ctr bench.SearchCounter
	next := 0
	// run reads for d from frame next on, and moves next past what it read.
	run := func(d time.Duration) bench.Count {
		rot := append(slices.Clone(frames[next:]), frames[:next]...)
		c, err := bench.AlternateSearch(bench.OpenSearch(t.API.Search), rot, batch, bench.SearchCheck{Records: 1}, &ctr)(b.Context(), d)
		if err != nil {
			b.Fatal(err)
		}
		next = (next + int(c.Ops)/batch) % len(frames)
		return c
	}
	warm := 60 * time.Second
	if v := os.Getenv("PROTOBASE_BENCH_WARMUP"); v != "" {
		if warm, err = time.ParseDuration(v); err != nil {
			b.Fatalf("PROTOBASE_BENCH_WARMUP=%q: %v", v, err)
		}
	}
	for read, start := 0, time.Now(); read < records && time.Since(start) < warm; {
		read += int(run(time.Second).Ops)
	}
	h0, m0 := blockCache(b, metrics)
	var ops int64
	var took time.Duration
	cpu0 := processCPU(b)
	for b.Loop() {
		c := run(100 * time.Millisecond)
		ops += c.Ops
		took += c.Elapsed
	}
	b.ReportMetric(float64(ops)/took.Seconds(), "queries/s")
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(ops), "cpu-ns/query")
	h1, m1 := blockCache(b, metrics)
	b.ReportMetric((h1-h0)/float64(ops), "block-hits/query")
	b.ReportMetric((m1-m0)/float64(ops), "block-misses/query")
}

// largeTarget returns a target holding items 0..records-1, compacted,
// and the address of its metrics: an embedded server on a store kept
// under $PROTOBASE_BENCH_DIR, or in a temporary directory.
func largeTarget(b *testing.B, records int) (*bench.Target, string) {
	root := os.Getenv("PROTOBASE_BENCH_DIR")
	if root == "" {
		root = b.TempDir()
	}
	dir := filepath.Join(root, fmt.Sprintf("items-%d", records))
	loaded := filepath.Join(root, fmt.Sprintf("items-%d.loaded", records))
	_, err := os.Stat(loaded)
	fresh := err != nil
	if fresh {
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
	}
	cfg := server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", Lab: true}
	if v := os.Getenv("PROTOBASE_BENCH_RECORD_CACHE_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("PROTOBASE_BENCH_RECORD_CACHE_BYTES=%q: want a byte count", v)
		}
		cfg.RecordCacheBytes = n
	}
	srv, err := server.Start(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			b.Error(err)
		}
	})
	t, err := bench.StartTarget(b.Context(), srv.Addr(), bench.TargetConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = t.Close() })
	if err := t.EnsureSchema(b.Context(), bench.ItemSchema()); err != nil {
		b.Fatal(err)
	}
	if fresh {
		if err := t.LoadItems(b.Context(), nil, records); err != nil {
			b.Fatal(err)
		}
		if err := srv.Compact(b.Context()); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(loaded, nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return t, srv.MetricsAddr()
}

// blockCache returns the block cache's hits and misses so far, read from
// the Prometheus metrics at addr.
func blockCache(b *testing.B, addr string) (hits, misses float64) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		name, v, _ := strings.Cut(line, " ")
		f, _ := strconv.ParseFloat(v, 64)
		switch name {
		case "protobase_storage_block_cache_hits_total":
			hits = f
		case "protobase_storage_block_cache_misses_total":
			misses = f
		}
	}
	return hits, misses
}
