package pebble

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// These benchmarks are the "raw Pebble" baseline that the engine's ingest path
// is compared with. One record is a primary row plus one secondary-index entry,
// laid out like the engine's keys:
//
//	primary: 0x01 | type id (4 bytes BE) | record id (8 bytes BE)  -> ~100-byte value
//	index:   0x02 | index id (4 bytes BE) | 16-byte indexed value | record id -> empty
//
// Run with: go test -run='^$' -bench=. -benchtime=2s ./internal/store/

const (
	benchTypeID   = 42
	benchIndexID  = 7
	benchValueLen = 100
)

// splitmix64 scrambles ids into pseudo-random indexed values, so index
// entries land all over the index keyspace as they would for a real field.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func primaryKey(dst []byte, id uint64) []byte {
	dst = append(dst[:0], 0x01)
	dst = binary.BigEndian.AppendUint32(dst, benchTypeID)
	return binary.BigEndian.AppendUint64(dst, id)
}

func indexKey(dst []byte, id uint64) []byte {
	dst = append(dst[:0], 0x02)
	dst = binary.BigEndian.AppendUint32(dst, benchIndexID)
	dst = binary.BigEndian.AppendUint64(dst, splitmix64(id))
	dst = binary.BigEndian.AppendUint64(dst, splitmix64(^id))
	return binary.BigEndian.AppendUint64(dst, id)
}

// recordValue fills a ~100-byte value that varies with id (so it does not
// compress to nothing).
func recordValue(dst []byte, id uint64) []byte {
	dst = dst[:0]
	x := id
	for len(dst) < benchValueLen {
		x = splitmix64(x)
		dst = binary.LittleEndian.AppendUint64(dst, x)
	}
	return dst[:benchValueLen]
}

// recordWriter appends records to a batch, reusing its buffers.
type recordWriter struct {
	pk, ik, val []byte
}

func (w *recordWriter) add(b *Batch, id uint64) {
	w.pk = primaryKey(w.pk, id)
	w.ik = indexKey(w.ik, id)
	w.val = recordValue(w.val, id)
	b.Set(w.pk, w.val)
	b.Set(w.ik, nil)
}

func openBench(b *testing.B, syncWrites bool) *Store {
	b.Helper()
	return openBenchOpts(b, Options{Dir: b.TempDir(), Sync: syncWrites})
}

func openBenchOpts(b *testing.B, o Options) *Store {
	b.Helper()
	o.Layout = testLayout
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}

// reportStalls reports Pebble write stalls (memtables or L0 full because
// flushes/compactions fell behind), which dominate sustained-ingest variance.
func reportStalls(b *testing.B, s *Store) {
	m := s.Metrics()
	b.ReportMetric(float64(m.WriteStalls), "stalls")
	b.ReportMetric(float64(m.WriteStallTime.Milliseconds()), "stall-ms")
}

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

// BenchmarkRawBatchCommit: one op = Commit (Apply + Wait) of one batch of N
// records from a single goroutine.
func BenchmarkRawBatchCommit(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		for _, syncWrites := range []bool{true, false} {
			b.Run(fmt.Sprintf("batch=%d/sync=%s", n, onOff(syncWrites)), func(b *testing.B) {
				s := openBench(b, syncWrites)
				batch := s.NewBatch()
				batch.Stamp(1)
				defer batch.Close()
				var w recordWriter
				var id uint64
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					batch.Reset()
					for range n {
						id++
						w.add(batch, id)
					}
					if err := s.Commit(batch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
				reportStalls(b, s)
			})
		}
	}
}

// BenchmarkRawBatchCommitParallel: like BenchmarkRawBatchCommit but with
// several committers, each applying under a shared lock (as the engine does)
// and waiting for the fsync after releasing it, so that their batches share
// fsyncs (group commit). b.N batches are split among the committers.
func BenchmarkRawBatchCommitParallel(b *testing.B) {
	type config struct {
		committers   int
		syncWrites   bool
		syncInterval time.Duration
	}
	// (WALMinSyncInterval is not benchmarked by default: with 2 committers and
	// 1-record batches, 500µs cut throughput ~10x on a 2-core dev box. Add
	// {2, true, 500 * time.Microsecond} here to try it.)
	configs := []config{{2, true, 0}, {8, true, 0}, {2, false, 0}}
	for _, c := range configs {
		for _, n := range []int{1, 100, 1000} {
			name := fmt.Sprintf("committers=%d/batch=%d/sync=%s", c.committers, n, onOff(c.syncWrites))
			if c.syncInterval > 0 {
				name += fmt.Sprintf("/minsync=%s", c.syncInterval)
			}
			b.Run(name, func(b *testing.B) {
				s := openBenchOpts(b, Options{Dir: b.TempDir(), Sync: c.syncWrites, WALMinSyncInterval: c.syncInterval})
				var (
					lock   sync.Mutex
					nextID atomic.Uint64
					ops    atomic.Int64
					wg     sync.WaitGroup
				)
				b.ReportAllocs()
				b.ResetTimer()
				for range c.committers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						batch := s.NewBatch()
						batch.Stamp(1)
						defer batch.Close()
						var w recordWriter
						for ops.Add(1) <= int64(b.N) {
							batch.Reset()
							first := nextID.Add(uint64(n)) - uint64(n)
							for j := range uint64(n) {
								w.add(batch, first+j+1)
							}
							lock.Lock()
							err := s.Apply(batch)
							lock.Unlock()
							if err == nil {
								err = batch.Wait()
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
				reportStalls(b, s)
			})
		}
	}
}

// benchGetStore loads n records (primary keys with even ids 0, 2, ...,
// 2n-2), flushes them and compacts everything into L6, the steady state of a
// mature store (~25 MB of sstables).
func benchGetStore(b *testing.B, n int) *Store {
	b.Helper()
	s := openBench(b, false)
	batch := s.NewBatch()
	batch.Stamp(1)
	defer batch.Close()
	var pk, val []byte
	for i := range n {
		id := uint64(2 * i)
		pk = primaryKey(pk, id)
		val = recordValue(val, id)
		batch.Set(pk, val)
		if batch.Count() == 1000 || i == n-1 {
			if err := s.Commit(batch); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
		}
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
		b.Fatal(err)
	}
	return s
}

const benchGetRecords = 200_000

// benchGet runs point reads of random keys: existing ones (even ids) when
// hit is set, else absent ones inside the stored key range (odd ids), which
// only bloom filters can rule out without reading a data block.
func benchGet(b *testing.B, hit bool) {
	paths := []struct {
		name string
		get  func(s *Store, key, dst []byte) ([]byte, bool, error)
	}{
		{"via=Get", (*Store).Get},
		{"via=GetLikelyMissing", (*Store).GetLikelyMissing},
	}
	// The data fits the default 256 MiB block cache, so this measures CPU
	// cost. GetLikelyMissing's advantage (no data block read for a miss in
	// L6) shows only when data blocks are not cached, i.e. in stores much
	// larger than the cache.
	s := benchGetStore(b, benchGetRecords)
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			var key, dst []byte
			x := uint64(1)
			odd := uint64(1)
			if hit {
				odd = 0
			}
			filterHits := s.Metrics().FilterHits
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				x = splitmix64(x)
				key = primaryKey(key, 2*(x%benchGetRecords)+odd)
				var ok bool
				var err error
				dst, ok, err = p.get(s, key, dst)
				if err != nil || ok != hit {
					b.Fatalf("Get(%x) = %v, %v", key, ok, err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(s.Metrics().FilterHits-filterHits)/float64(b.N), "filter-skips/op")
		})
	}
}

// BenchmarkGetHit: point reads of random existing keys.
func BenchmarkGetHit(b *testing.B) { benchGet(b, true) }

// BenchmarkGetMissing: point reads of random absent keys.
func BenchmarkGetMissing(b *testing.B) { benchGet(b, false) }
