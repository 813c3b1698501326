package recordcache

import (
	"fmt"
	"testing"
)

// BenchmarkGetMany probes batches of 100 and 1,000 keys of a cache of
// 100,000 records of 110 bytes (the lab's lookups), visiting every key
// once per pass through the keys in a stride, and reads each record's
// last byte, as a response's copy would:
//
//	go test -run '^$' -bench GetMany ./internal/recordcache/
func BenchmarkGetMany(b *testing.B) {
	const records = 100000
	c := New(1 << 30)
	keys := make([][]byte, records)
	val := make([]byte, 110)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "\x00\x00\x00\x05\x01%08d", i)
		c.Fill(keys[i], val, c.Gen())
	}
	order := make([][]byte, 0, records)
	for i, id := 0, 0; i < records; i++ {
		order = append(order, keys[id])
		id = (id + 7919) % records
	}
	for _, batch := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			var bt Batch
			var sink byte
			i := 0
			for b.Loop() {
				ks := order[i : i+batch]
				c.GetMany(batch, func(j int) []byte { return ks[j] }, &bt)
				for j := range batch {
					// A key whose tag another key of its shard shares
					// may be a miss (about one in 10^6 here).
					if v, ok := bt.Val(j); ok && len(v) > 0 {
						sink ^= v[len(v)-1]
					}
				}
				i = (i + batch) % records
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
			_ = sink
		})
	}
}
