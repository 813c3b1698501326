package oneop

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// BenchmarkOps runs each Protobase row's operation b.N times in all from
// 16 goroutines on an embedded server, as the experiment does, for
// profiles of the whole path (client, transport, engine, store) in one
// process: go test -run '^$' -bench Ops/write -cpuprofile cpu.out. The
// search-raw row, which the experiment lacks, is the search row without
// the client library.
func BenchmarkOps(b *testing.B) {
	const clients, records = 16, 10000
	t := labtest.ItemTarget(b, bench.TargetConfig{})
	if err := t.LoadItems(b.Context(), nil, records); err != nil {
		b.Fatal(err)
	}
	next := new(ids)
	next.next.Store(records)
	var written atomic.Uint64
	for _, tc := range []struct {
		name string
		open opener
	}{
		{"get", openGet(t.Client, records)},
		{"query", openQuery(t.Client, records)},
		{"search", openSearch(t.Client, records)},
		{"search-raw", openSearchRaw(t, records)},
		{"write", openWrite(t.Client, next, &written)},
		{"write-shared", (&sharedWriter{c: t.Client, next: next, written: &written}).open},
		{"health", openHealth(t.Client)},
		{"echo", openEcho(t, records)},
	} {
		b.Run(tc.name, func(b *testing.B) { runOps(b, clients, tc.open) })
	}
	// The same writes on a server that does not fsync: what the path
	// costs apart from waiting for the disk.
	ns := labtest.ItemTarget(b, bench.TargetConfig{NoSync: true})
	b.Run("write-nosync", func(b *testing.B) { runOps(b, clients, openWrite(ns.Client, next, &written)) })
}

// openSearchRaw is the search row on the generated stream (t.API), with
// no client library: what the Go client's Search adds is the difference.
func openSearchRaw(t *bench.Target, records int) opener {
	return func(ctx context.Context, cl int) (session, error) {
		st, err := t.API.Search(ctx)
		if err != nil {
			return session{}, err
		}
		key := keys(records, cl)
		do := func(context.Context) error {
			id := key()
			if err := st.Send(&pb.SearchRequest{Queries: []*pb.Query{bench.LookupQuery(id)}}); err != nil {
				return bench.StreamError(st, "search", err)
			}
			resp, err := st.Recv()
			if err != nil {
				return fmt.Errorf("search %d: %w", id, err)
			}
			if len(resp.Results) != 1 || len(resp.Results[0].Records) != 1 || len(resp.Done) != 1 {
				return fmt.Errorf("search %d: %d results and %d ends for one lookup", id, len(resp.Results), len(resp.Done))
			}
			return nil
		}
		return session{do: do, close: func() error { return endStream(st, "search") }}, nil
	}
}

func runOps(b *testing.B, clients int, open opener) {
	b.Helper()
	ctx := b.Context()
	sessions := make([]session, clients)
	for cl := range sessions {
		s, err := open(ctx, cl)
		if err != nil {
			b.Fatal(err)
		}
		sessions[cl] = s
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	errs := make([]error, clients)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for cl := range sessions {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := sessions[cl].do(context.Background()); err != nil {
					errs[cl] = err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	// CPU holds under load where the rate does not: the measure of the
	// path's own cost on a shared machine (client and server together).
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	for cl, s := range sessions {
		if errs[cl] != nil {
			b.Fatal(errs[cl])
		}
		if err := s.close(); err != nil {
			b.Fatal(err)
		}
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
