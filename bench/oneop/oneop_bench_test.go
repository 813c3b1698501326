package oneop

import (
	"context"
	"errors"
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
	sessions := openSessions(b, clients, open)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	runSlice(b, sessions, b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	// CPU holds under load where the rate does not: the measure of the
	// path's own cost on a shared machine (client and server together).
	b.ReportMetric(microsPerOp(processCPU(b)-cpu0, b.N), "cpu-µs/op")
	closeSessions(b, sessions)
}

// BenchmarkOpsRatio measures the pairs the one-operation targets compare
// (get and query against a health check; search, and search-raw without
// the client library, against echo) in turns of 2,000 operations, A then
// B, b.N operations of each, and reports A's rate over B's (ratio), with
// each side's rate and CPU per operation (client and server together).
// Taken in turns, both see the same load on a shared machine; rows
// measured one after the other (BenchmarkOps) each meet whatever load
// there is then, and their ratios moved by a third from round to round.
//
//	go test -run '^$' -bench OpsRatio -benchtime 200000x -count 5 ./bench/oneop/
func BenchmarkOpsRatio(b *testing.B) {
	const clients, records, turn = 16, 10000, 2000
	t := labtest.ItemTarget(b, bench.TargetConfig{})
	if err := t.LoadItems(b.Context(), nil, records); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		a, b opener
	}{
		{"get_health", openGet(t.Client, records), openHealth(t.Client)},
		{"query_health", openQuery(t.Client, records), openHealth(t.Client)},
		{"search_echo", openSearch(t.Client, records), openEcho(t, records)},
		{"search-raw_echo", openSearchRaw(t, records), openEcho(t, records)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			a, o := openSessions(b, clients, tc.a), openSessions(b, clients, tc.b)
			var ta, to, ca, co time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(turn, b.N-done)
				cpu := processCPU(b)
				ta += runSlice(b, a, n)
				mid := processCPU(b)
				to += runSlice(b, o, n)
				ca, co = ca+mid-cpu, co+processCPU(b)-mid
				done += n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/ta.Seconds(), "A-ops/s")
			b.ReportMetric(float64(b.N)/to.Seconds(), "B-ops/s")
			b.ReportMetric(microsPerOp(ca, b.N), "A-cpu-µs/op")
			b.ReportMetric(microsPerOp(co, b.N), "B-cpu-µs/op")
			b.ReportMetric(to.Seconds()/ta.Seconds(), "ratio")
			closeSessions(b, a)
			closeSessions(b, o)
		})
	}
}

// openSessions opens one session per client goroutine.
func openSessions(b *testing.B, clients int, open opener) []session {
	b.Helper()
	sessions := make([]session, clients)
	for cl := range sessions {
		s, err := open(b.Context(), cl)
		if err != nil {
			b.Fatal(err)
		}
		sessions[cl] = s
	}
	return sessions
}

// runSlice performs n operations in all, one goroutine per session, and
// returns how long they took.
func runSlice(b *testing.B, sessions []session, n int) time.Duration {
	b.Helper()
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	errs := make([]error, len(sessions))
	start := time.Now()
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
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return took
}

// closeSessions ends every session, failing on what went wrong there.
func closeSessions(b *testing.B, sessions []session) {
	b.Helper()
	for _, s := range sessions {
		if err := s.close(); err != nil {
			b.Fatal(err)
		}
	}
}

// microsPerOp is d spread over n operations, in microseconds.
func microsPerOp(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }

// processCPU is the CPU time the process has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
