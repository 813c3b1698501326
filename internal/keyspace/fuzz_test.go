package keyspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/protobase/protobase/internal/orderedcode"
)

// FuzzIndexEntryPK parses arbitrary keys as index entries: it must never
// panic, a result must be a suffix of the key after the prefix, and an
// entry built from an index key and a pk must give the pk back.
func FuzzIndexEntryPK(f *testing.F) {
	f.Add([]byte{TagIndex, 0, 0, 0, 1, 0x01}, uint32(1), "ann", int64(7))
	f.Add([]byte{TagRecord, 0, 0, 0, 1}, uint32(1), "", int64(-1))
	f.Add([]byte{TagIndex, 0, 0, 0, 2, 'a', 0x00, 0xff, 'b'}, uint32(2), "a\x00b", int64(0))
	f.Fuzz(func(t *testing.T, key []byte, id uint32, s string, n int64) {
		kinds := []orderedcode.Kind{orderedcode.KindString, orderedcode.KindInt}
		pk, err := IndexEntryPK(key, id, kinds)
		if err == nil {
			if len(key) < PrefixLen || key[0] != TagIndex || binary.BigEndian.Uint32(key[1:]) != id {
				t.Fatalf("accepted foreign key % x for index %d", key, id)
			}
			if !bytes.HasSuffix(key, pk) {
				t.Fatalf("pk % x is not a suffix of % x", pk, key)
			}
		} else if len(key) >= PrefixLen && key[0] == TagIndex && binary.BigEndian.Uint32(key[1:]) == id && errors.Is(err, ErrForeignKey) {
			t.Fatalf("key % x of index %d reported foreign", key, id)
		}

		wantPK := orderedcode.AppendInt(orderedcode.AppendString(nil, s), n)
		entry := AppendIndexPrefix(nil, id)
		entry = orderedcode.AppendInt(orderedcode.AppendString(entry, s), n)
		entry = append(entry, wantPK...)
		got, err := IndexEntryPK(entry, id, kinds)
		if err != nil {
			t.Fatalf("built entry % x: %v", entry, err)
		}
		if !bytes.Equal(got, wantPK) {
			t.Fatalf("built entry % x: pk % x, want % x", entry, got, wantPK)
		}
	})
}

// FuzzSpanEnd holds SpanEnd to what the store relies on: a key's span ends
// after it, and every key from it up to that end is in the same span.
func FuzzSpanEnd(f *testing.F) {
	f.Add([]byte(nil), []byte(LogPrefix))
	f.Add(AppendLogKey(nil, 1), AppendLogKey(nil, 2))
	f.Add([]byte(SeqKey), RecordPrefix(0))
	f.Add(RecordPrefix(3), AppendRecordKey(nil, 3, []byte{0xff}))
	f.Add([]byte{TagIndex, 0}, []byte{TagIndex, 0, 0, 0})
	f.Add([]byte(StorePrefix), []byte(APIKeyPrefix))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if bytes.Compare(a, b) > 0 {
			a, b = b, a
		}
		end := SpanEnd(a)
		if end != nil && bytes.Compare(end, a) <= 0 {
			t.Fatalf("SpanEnd(% x) = % x, not after it", a, end)
		}
		if end == nil || bytes.Compare(b, end) < 0 {
			if got := SpanEnd(b); !bytes.Equal(got, end) {
				t.Fatalf("% x and % x share a span, but it ends at % x and % x", a, b, end, got)
			}
		}
	})
}

// FuzzNumberedKeys holds the change log's keys to a round trip: a key
// that parses is the key its number makes.
func FuzzNumberedKeys(f *testing.F) {
	f.Add(AppendLogKey(nil, 7))
	f.Add(AppendLogKey(nil, 1<<40))
	f.Add([]byte(LogPrefix))
	f.Add(append(AppendLogKey(nil, 3), 0))
	f.Fuzz(func(t *testing.T, key []byte) {
		if n, ok := LogCommit(key); ok && !bytes.Equal(AppendLogKey(nil, n), key) {
			t.Fatalf("LogCommit(% x) = %d, whose key is % x", key, n, AppendLogKey(nil, n))
		}
	})
}
