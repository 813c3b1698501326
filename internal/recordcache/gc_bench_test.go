package recordcache

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"
)

// BenchmarkGCFull measures one full garbage collection with a cache of
// 4,000,000 records (10-byte keys, 100-byte values: the lab's lookups over
// 4 M records) live: each entry is its own allocation, which the collector
// marks. Reported per collection, with the live heap.
func BenchmarkGCFull(b *testing.B) {
	const n = 4_000_000
	c := New(1 << 30)
	key, val := make([]byte, 10), make([]byte, 100)
	for i := range n {
		binary.BigEndian.PutUint64(key[2:], uint64(i))
		c.Fill(key, val, c.Gen())
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		runtime.GC()
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/gc")
	b.ReportMetric(float64(ms.HeapAlloc>>20), "MiB-live")
	b.ReportMetric(float64(c.Bytes()>>20), "MiB-counted")
	runtime.KeepAlive(c)
}
