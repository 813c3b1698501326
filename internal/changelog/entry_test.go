package changelog

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// entryOf encodes changes as one entry, the way the writer does.
func entryOf(cs []Change) []byte {
	b := appendHeader(nil)
	for _, c := range cs {
		b = appendChange(b, c.Op, c.TypeID, c.Rec, c.Old)
	}
	return b
}

// readLog decodes every change of an entry, or fails.
func readLog(v []byte) ([]Change, error) { return readLogBy(v, (*Entry).Next) }

// readLogBy is readLog with the given reader of one change.
func readLogBy(v []byte, next func(*Entry, *Change) (bool, error)) ([]Change, error) {
	le, err := parseEntry(v)
	if err != nil {
		return nil, err
	}
	var out []Change
	for {
		var c Change
		ok, err := next(&le, &c)
		if err != nil || !ok {
			return out, err
		}
		out = append(out, c)
	}
}

func TestLogEntryRoundTrip(t *testing.T) {
	in := []Change{
		{Op: Insert, TypeID: 1, Rec: []byte("new")},
		{Op: Update, TypeID: 1<<32 - 1, Rec: []byte("b"), Old: []byte("a")},
		{Op: Remove, TypeID: 7, Old: bytes.Repeat([]byte("x"), 300)},
	}
	out, err := readLog(entryOf(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d changes, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i].Op != in[i].Op || out[i].TypeID != in[i].TypeID || !bytes.Equal(out[i].Rec, in[i].Rec) ||
			!bytes.Equal(out[i].Old, in[i].Old) || out[i].Index != uint32(i) {
			t.Errorf("change %d = %+v, want %+v", i, out[i], in[i])
		}
	}
	for _, bad := range [][]byte{nil, {2}, append([]byte{version}, make([]byte, 15)...)} {
		if _, err := readLog(bad); err == nil {
			t.Errorf("entry %x accepted", bad)
		}
	}
}

// FuzzLogEntry reads arbitrary bytes as a log entry: never a panic, and
// whatever decodes encodes to an entry that decodes to the same changes
// (not always the same bytes: a length may come as an over-long varint).
func FuzzLogEntry(f *testing.F) {
	f.Add(entryOf([]Change{{Op: Insert, TypeID: 3, Rec: []byte{8, 1}}}))
	f.Add(entryOf([]Change{{Op: Update, TypeID: 3, Rec: []byte{8, 1}, Old: []byte{8, 2}}, {Op: Remove, TypeID: 4, Old: []byte{8}}}))
	f.Add(append(appendHeader(nil), 9, 0x80))
	f.Add(entryOf([]Change{{Op: Update, TypeID: 200, Rec: make([]byte, 127), Old: make([]byte, 128)}, {Op: Insert, TypeID: 1}}))
	f.Add(append(appendHeader(nil), byte(Remove), 1, 0, 5, 'a')) // old past the end
	f.Add(append(appendHeader(nil), 0, 1, 1, 'a', 0))            // op 0
	f.Add(append(appendHeader(nil), byte(Insert), 1, 0x7f, 'a')) // record past the end
	f.Fuzz(func(t *testing.T, v []byte) {
		cs, err := readLog(v)
		// The fast path reads every entry as the slow one does.
		slow, serr := readLogBy(v, (*Entry).nextSlow)
		if (err == nil) != (serr == nil) || !sameChanges(cs, slow) {
			t.Fatalf("entry %x: next reads %+v, %v; nextSlow %+v, %v", v, cs, err, slow, serr)
		}
		if err != nil {
			return
		}
		again, err := readLog(entryOf(cs))
		if err != nil || len(again) != len(cs) {
			t.Fatalf("entry %x decodes to %+v, which encodes to an entry that decodes to %+v, %v", v, cs, again, err)
		}
		for i := range cs {
			a, b := cs[i], again[i]
			if a.Op != b.Op || a.TypeID != b.TypeID || !bytes.Equal(a.Rec, b.Rec) || !bytes.Equal(a.Old, b.Old) || a.Index != b.Index {
				t.Fatalf("change %d of %x: %+v, then %+v", i, v, a, b)
			}
		}
	})
}

func sameChanges(a, b []Change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Op != b[i].Op || a[i].TypeID != b[i].TypeID || !bytes.Equal(a[i].Rec, b[i].Rec) ||
			!bytes.Equal(a[i].Old, b[i].Old) || a[i].Index != b[i].Index {
			return false
		}
	}
	return true
}

// BenchmarkLogEntry reads an entry of 1,000 inserts of ~100-byte records
// (the watch experiment's) change by change, by next and by nextSlow alone,
// in one invocation:
//
//	go test -run '^$' -bench LogEntry ./internal/changelog/
func BenchmarkLogEntry(b *testing.B) {
	cs := make([]Change, 1000)
	for i := range cs {
		cs[i] = Change{Op: Insert, TypeID: 1, Rec: itemRecord(int64(1<<40 + i))}
	}
	v := entryOf(cs)
	for _, c := range []struct {
		name string
		next func(*Entry, *Change) (bool, error)
	}{{"next", (*Entry).Next}, {"slow", (*Entry).nextSlow}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(cs)))
			for b.Loop() {
				le, err := parseEntry(v)
				if err != nil {
					b.Fatal(err)
				}
				var ch Change
				for {
					ok, err := c.next(&le, &ch)
					if err != nil {
						b.Fatal(err)
					}
					if !ok {
						break
					}
				}
			}
		})
	}
}

// itemRecord is a record shaped like the lab's items: an id, a name, an
// email, a time and a sentence.
func itemRecord(id int64) []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "name-12345")
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, "user1099511627776@example.com")
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, 1700000000000+uint64(id))
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	return protowire.AppendString(b, "lorem ipsum dolor sit amet, consectetur adipiscing")
}
