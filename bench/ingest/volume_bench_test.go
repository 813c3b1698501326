//go:build linux

package ingest

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
)

// BenchmarkSustainedVolume inserts b.N of the lab's indexed items (two
// secondary indexes, ids from the clock as the lab's are) straight into an
// engine on a syncing store, in batches of 1,000, with Watch's change log
// on and off, and reports what a sustained run costs beyond its first
// second, in figures a loaded machine does not blur: the process's CPU
// time per record before the first flush and after it (their ratio is what
// a CPU-bound sustained run keeps of its start), the CPU time per record of
// the whole run split into the writer's own thread (validation, keys, the
// memtable insert, the WAL write) and the rest of the process (flushes,
// compactions, the WAL's fsyncs, the garbage collector), and the sstable
// bytes flushes and compactions wrote per record. Run it with a fixed
// count (-benchtime 3000000x, about the lab's 15 s): the work grows with
// the data.
func BenchmarkSustainedVolume(b *testing.B) {
	for _, logOn := range []bool{true, false} {
		b.Run(fmt.Sprintf("changelog=%v", logOn), func(b *testing.B) {
			benchVolume(b, logOn)
		})
	}
}

func benchVolume(b *testing.B, logOn bool) {
	ctx := context.Background()
	st, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var opts engine.Options
	if logOn {
		opts.WatchRetention = time.Hour
	}
	e, err := engine.Open(ctx, st, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := e.ApplySchema(ctx, &pb.ApplySchemaRequest{Files: bench.ItemSchema()}); err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	recs := make([]*anypb.Any, batch)
	for i := range recs {
		recs[i] = &anypb.Any{TypeUrl: bench.TypeURLPrefix + bench.IndexedItemType}
	}
	first := time.Now().UnixNano() / 1000
	w := e.NewWriter()
	// The writer's goroutine keeps its thread, so that thread's CPU time
	// is the foreground's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	start, fgStart := processCPU(b), threadCPU(b)
	var before, after time.Duration // CPU before and after the first flush
	var nBefore int
	for n := 0; n < b.N; n += batch {
		for i := range recs {
			recs[i].Value = bench.AppendItem(recs[i].Value[:0], first+int64(n+i))
		}
		if err := w.Apply(ctx, engine.Batch{Op: engine.OpInsert, Records: recs[:min(batch, b.N-n)]}); err != nil {
			b.Fatal(err)
		}
		if before == 0 && st.Metrics().Flushes > 0 {
			before, nBefore = processCPU(b)-start, n+batch
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	whole, fg := processCPU(b)-start, threadCPU(b)-fgStart
	b.ReportMetric(float64(fg.Nanoseconds())/1e3/float64(b.N), "fg-cpu-µs/record")
	b.ReportMetric(float64((whole-fg).Nanoseconds())/1e3/float64(b.N), "bg-cpu-µs/record")
	m := st.Metrics()
	if before > 0 && nBefore < b.N {
		after = processCPU(b) - start - before
		cpuBefore := float64(before.Nanoseconds()) / 1e3 / float64(nBefore)
		cpuAfter := float64(after.Nanoseconds()) / 1e3 / float64(b.N-nBefore)
		b.ReportMetric(cpuBefore, "cpu-µs/record-first")
		b.ReportMetric(cpuAfter, "cpu-µs/record-after")
		b.ReportMetric(cpuBefore/cpuAfter, "kept")
	}
	b.ReportMetric(float64(m.FlushedBytes)/float64(b.N), "flushed-B/record")
	b.ReportMetric(float64(m.CompactedBytes)/float64(b.N), "compacted-B/record")
	b.ReportMetric(float64(m.CompactionDebtBytes)/float64(b.N), "debt-B/record")
	b.ReportMetric(float64(m.WriteStalls), "stalls")
	b.ReportMetric(0, "ns/op")
}

// threadCPU is the CPU time (user and system) of the calling goroutine's
// thread, which it must have locked.
func threadCPU(b *testing.B) time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD, Linux only
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU time the process has used (user and system), which
// counts the storage engine's background flushes and compactions.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLabSustained runs the lab's sustained shape (bench.InsertStream
// against an embedded syncing server, the indexed items, ids from the
// clock as the lab's are, batches of 1,000) for b.N records and reports
// the process's CPU time per record over the first 500,000 records (about
// the lab's first second on this 2-core machine) and over the whole run.
// Their ratio (kept) is what a CPU-bound sustained run keeps of its first
// second, client, transport and server together, in a figure a loaded
// machine does not blur. Run it with -benchtime 6000000x (about the lab's
// 15 s on a quiet machine).
func BenchmarkLabSustained(b *testing.B) {
	ctx := context.Background()
	t := labtest.ItemTarget(b, bench.TargetConfig{})
	const batch, firstPart = 1000, 500000
	base := time.Now().UnixNano() / 1000
	var next int64
	var start, atFirst time.Duration
	w := bench.InsertStream(t, batch, bench.ItemWireBytes, func(buf []byte) ([]byte, int64) {
		if next == firstPart {
			atFirst = processCPU(b)
		}
		first := next
		next += batch
		return bench.AppendWriteRecords(buf, 2, bench.IndexedItemType, base+first, batch)
	}, func(int64) bool { return next < int64(b.N) }, nil)
	b.ResetTimer()
	start = processCPU(b)
	if _, err := w(ctx, time.Hour); err != nil {
		b.Fatal(err)
	}
	whole := processCPU(b) - start
	b.StopTimer()
	if atFirst > 0 {
		first := float64((atFirst - start).Nanoseconds()) / 1e3 / firstPart
		all := float64(whole.Nanoseconds()) / 1e3 / float64(next)
		b.ReportMetric(first, "cpu-µs/record-first")
		b.ReportMetric(all, "cpu-µs/record")
		b.ReportMetric(first/all, "kept")
	}
	b.ReportMetric(0, "ns/op")
}
