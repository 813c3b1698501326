package pebble

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
)

// Flushes and compactions end their tables at the key space's span
// boundaries (the layout's SpanEnd, and the store's own keys' spans):
// after writes that interleave the change log, the commit sequence, two
// record types and an index (and so the index journal) in every batch, no
// table on any level holds keys of two spans.
func TestTablesStayWithinOneSpan(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	val := bytes.Repeat([]byte("v"), 100)
	var n uint64
	for round := 0; round < 3; round++ {
		for i := 0; i < 200; i++ {
			b := s.NewBatch()
			b.Stamp(1)
			for j := 0; j < 50; j++ {
				n++
				pk := binary.BigEndian.AppendUint64(nil, n)
				b.Set(keyspace.AppendRecordKey(nil, 1, pk), val)
				b.Set(keyspace.AppendRecordKey(nil, 2, pk), val)
				b.Set(append(keyspace.AppendIndexPrefix(nil, 3), pk[7], pk[6]), nil)
			}
			b.Set(keyspace.AppendLogKey(nil, n), val)
			b.Set([]byte(keyspace.SeqKey), binary.BigEndian.AppendUint64(nil, n))
			if err := s.Commit(b); err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	levels, err := s.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for level, ts := range levels {
		for _, tb := range ts {
			tables++
			lo, hi := tb.Smallest.UserKey, tb.Largest.UserKey
			if end := s.layout.tableEnd(lo); end != nil && bytes.Compare(hi, end) >= 0 {
				t.Errorf("L%d table %s spans % x .. % x, across the span end % x", level, tb.FileNum, lo, hi, end)
			}
		}
	}
	if tables < 5 {
		t.Fatalf("%d tables, want one per span at least", tables)
	}
}

// A flush writes one table per span, however much the memtable holds of
// it: a span that only appends (here a type's records under rising keys)
// then leaves one table per flush, which a compaction can move down whole.
// With Pebble's 2 MiB level-0 target, the 6 MB below became three tables,
// and a compaction of several tables rewrites them.
func TestFlushWritesOneTablePerSpan(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), Layout: testLayout, CacheBytes: 8 << 20, MemTableBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 100)
	b := s.NewBatch()
	b.Stamp(1)
	const n = 60000 // 6 MB of values that do not compress
	for i := uint64(0); i < n; i++ {
		for j := range val {
			val[j] = byte(rng.Uint32())
		}
		b.Set(keyspace.AppendRecordKey(nil, 1, binary.BigEndian.AppendUint64(nil, i)), val)
	}
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	levels, err := s.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var sizes []uint64
	for _, ts := range levels {
		for _, tb := range ts {
			if tb.Smallest.UserKey[0] == keyspace.TagRecord {
				sizes = append(sizes, tb.Size)
			}
		}
	}
	if len(sizes) != 1 || sizes[0] < n*100 {
		t.Fatalf("one flush of %d MB of records left tables of %v bytes, want one table", n*100>>20, sizes)
	}
}
