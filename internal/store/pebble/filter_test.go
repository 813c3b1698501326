package pebble

import (
	"encoding/binary"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/protobase/protobase/internal/keyspace"
)

// Tables of a span SetUnfilteredSpans names are written without filter
// keys, the others keep theirs, and point lookups answer the same in both:
// a present key is found, an absent one is not.
func TestUnfilteredSpans(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	s.SetUnfilteredSpans(func(key []byte) bool { return len(key) > 0 && key[0] == keyspace.TagIndex })
	b := s.NewBatch()
	b.Stamp(1)
	key := func(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }
	for i := uint64(0); i < 2000; i += 2 {
		b.Set(keyspace.AppendRecordKey(nil, 1, key(i)), []byte("record"))
		b.Set(append(keyspace.IndexPrefix(7), key(i)...), nil)
	}
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	seen := map[byte]uint64{}
	for _, db := range []*pebble.DB{s.db, s.index.db} {
		levels, err := db.SSTables(pebble.WithProperties())
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range levels {
			for _, tb := range ts {
				if k := tb.Smallest.UserKey[0]; k == keyspace.TagRecord || k == keyspace.TagIndex {
					seen[k] = tb.Properties.FilterSize
				}
			}
		}
	}
	if f, ok := seen[keyspace.TagRecord]; !ok || f < 1000 {
		t.Errorf("records table: filter of %d bytes (present %v), want a bloom filter", f, ok)
	}
	if f, ok := seen[keyspace.TagIndex]; !ok || f > uint64(len(matchAllFilter)) {
		t.Errorf("index table: filter of %d bytes (present %v), want at most %d", f, ok, len(matchAllFilter))
	}
	for i := uint64(0); i < 2000; i++ {
		for _, k := range [][]byte{keyspace.AppendRecordKey(nil, 1, key(i)), append(keyspace.IndexPrefix(7), key(i)...)} {
			_, found, err := s.GetLikelyMissing(k, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := i%2 == 0; found != want {
				t.Fatalf("GetLikelyMissing(% x) found %v, want %v", k, found, want)
			}
		}
	}
}
