package store

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
)

// Flushes and compactions end their tables at the key space's span
// boundaries (keyspace.SpanEnd): after writes that interleave the change
// log, the commit sequence, two record types and an index in every batch,
// no table on any level holds keys of two spans.
func TestTablesStayWithinOneSpan(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	val := bytes.Repeat([]byte("v"), 100)
	var n uint64
	for round := 0; round < 3; round++ {
		for i := 0; i < 200; i++ {
			b := s.NewBatch()
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
			if end := keyspace.SpanEnd(lo); end != nil && bytes.Compare(hi, end) >= 0 {
				t.Errorf("L%d table %s spans % x .. % x, across the span end % x", level, tb.FileNum, lo, hi, end)
			}
		}
	}
	if tables < 5 {
		t.Fatalf("%d tables, want one per span at least", tables)
	}
}
