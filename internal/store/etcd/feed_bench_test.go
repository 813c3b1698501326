package etcd_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// writeRevisions applies n batches of one key with a value of size bytes
// and returns the last revision.
func writeRevisions(b *testing.B, s *etcd.Store, n, size int) int64 {
	b.Helper()
	val := make([]byte, size)
	var last int64
	for i := range n {
		wb := s.NewWriteBatch()
		val[0] = byte(i)
		wb.Set([]byte("k"), val)
		if err := s.ApplyBatch(wb); err != nil {
			b.Fatal(err)
		}
		last = int64(wb.Position())
		wb.Close()
	}
	return last
}

// BenchmarkFeedHistory reads 5,000 revisions of history (one key of 100
// bytes each) from the start: the catch-up rate of a watcher coming back
// (etcd sends a watcher behind up to 1,000 revisions per response, each
// time its resync loop runs: every 100 ms).
func BenchmarkFeedHistory(b *testing.B) {
	s := openB(b, etcdtest.Start(b, etcdtest.Roomy))
	r0, err := s.Revision(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	const n = 5000
	last := writeRevisions(b, s, n, 100)
	b.ResetTimer()
	for range b.N {
		err := s.Changes(context.Background(), nil, r0, func(rev int64, _ []store.Event) error {
			if rev >= last {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "revisions/s")
}

// BenchmarkFeedLive times a batch from ApplyBatch to its delivery by a
// running feed; the "apply" metric is the write alone, measured in the same
// loop, so that their difference is the delivery.
func BenchmarkFeedLive(b *testing.B) {
	s := openB(b, etcdtest.Start(b, etcdtest.Roomy))
	r0, err := s.Revision(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan int64, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.Changes(ctx, nil, r0, func(rev int64, _ []store.Event) error {
			got <- rev
			return nil
		})
	}()
	var apply time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		wb := s.NewWriteBatch()
		wb.Set([]byte("k"), make([]byte, 100))
		if err := s.ApplyBatch(wb); err != nil {
			b.Fatal(err)
		}
		apply += time.Since(start)
		for rev := <-got; rev < int64(wb.Position()); rev = <-got {
		}
		wb.Close()
	}
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(apply.Nanoseconds())/float64(b.N), "apply-ns/op")
}

// BenchmarkFeedSlowReaderHeap writes 2,000 revisions of 10 KB while a
// reader holds its first one, and reports the heap they leave behind
// (heap-MB, after a GC) for the feed and, beside it, for etcd's client
// watch read the same way and for no slow reader at all (the etcd member
// runs in the test process: its own memory is in every row).
func BenchmarkFeedSlowReaderHeap(b *testing.B) {
	const n, size = 2000, 10 << 10
	for _, tc := range []struct {
		name  string
		start func(ctx context.Context, s *etcd.Store, after int64, hold <-chan struct{}) <-chan error
	}{
		{"none", func(context.Context, *etcd.Store, int64, <-chan struct{}) <-chan error {
			done := make(chan error, 1)
			done <- nil
			return done
		}},
		{"feed", func(ctx context.Context, s *etcd.Store, after int64, hold <-chan struct{}) <-chan error {
			done := make(chan error, 1)
			go func() {
				done <- s.Changes(ctx, nil, after, func(int64, []store.Event) error { <-hold; return nil })
			}()
			return done
		}},
		{"etcd-client", func(ctx context.Context, s *etcd.Store, after int64, hold <-chan struct{}) <-chan error {
			done := make(chan error, 1)
			wc := s.Client().Watch(ctx, s.Prefix(), clientv3.WithPrefix(), clientv3.WithRev(after+1), clientv3.WithPrevKV())
			go func() {
				for range wc {
					<-hold
				}
				done <- ctx.Err()
			}()
			return done
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s := openB(b, etcdtest.Start(b, etcdtest.Roomy))
				r0, err := s.Revision(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				ctx, cancel := context.WithCancel(context.Background())
				hold := make(chan struct{})
				done := tc.start(ctx, s, r0, hold)
				b.StartTimer()
				last := writeRevisions(b, s, n, size)
				// A fast watcher on the same connection seeing the last
				// revision: the cluster has sent the slow one everything.
				err = s.Changes(context.Background(), nil, last-1, func(int64, []store.Event) error { return errStop })
				if !errors.Is(err, errStop) {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MB")
				close(hold)
				cancel()
				<-done
				s.Close()
			}
		})
	}
}

func openB(b *testing.B, endpoint string) *etcd.Store {
	b.Helper()
	s, err := etcd.Open(etcd.Options{Endpoints: []string{endpoint}, Prefix: "/bench/"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
