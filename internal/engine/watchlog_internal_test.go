package engine

import (
	"bytes"
	"testing"
)

// logChanges encodes changes as one entry, the way the writer does.
func logChanges(cs []logChange) []byte {
	b := appendLogHeader(nil)
	for _, c := range cs {
		b = appendLogChange(b, c.op, c.typeID, c.rec, c.old)
	}
	return b
}

// readLog decodes every change of an entry, or fails.
func readLog(v []byte) ([]logChange, error) {
	le, err := parseLogEntry(v)
	if err != nil {
		return nil, err
	}
	var out []logChange
	for {
		c, ok, err := le.next()
		if err != nil || !ok {
			return out, err
		}
		out = append(out, c)
	}
}

func TestLogEntryRoundTrip(t *testing.T) {
	in := []logChange{
		{op: changeInsert, typeID: 1, rec: []byte("new")},
		{op: changeUpdate, typeID: 1<<32 - 1, rec: []byte("b"), old: []byte("a")},
		{op: changeRemove, typeID: 7, old: bytes.Repeat([]byte("x"), 300)},
	}
	out, err := readLog(logChanges(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d changes, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i].op != in[i].op || out[i].typeID != in[i].typeID || !bytes.Equal(out[i].rec, in[i].rec) ||
			!bytes.Equal(out[i].old, in[i].old) || out[i].index != uint32(i) {
			t.Errorf("change %d = %+v, want %+v", i, out[i], in[i])
		}
	}
	for _, bad := range [][]byte{nil, {2}, append([]byte{logVersion}, make([]byte, 15)...)} {
		if _, err := readLog(bad); err == nil {
			t.Errorf("entry %x accepted", bad)
		}
	}
}

// FuzzLogEntry reads arbitrary bytes as a log entry: never a panic, and
// whatever decodes encodes to an entry that decodes to the same changes
// (not always the same bytes: a length may come as an over-long varint).
func FuzzLogEntry(f *testing.F) {
	f.Add(logChanges([]logChange{{op: changeInsert, typeID: 3, rec: []byte{8, 1}}}))
	f.Add(logChanges([]logChange{{op: changeUpdate, typeID: 3, rec: []byte{8, 1}, old: []byte{8, 2}}, {op: changeRemove, typeID: 4, old: []byte{8}}}))
	f.Add(append(appendLogHeader(nil), 9, 0x80))
	f.Fuzz(func(t *testing.T, v []byte) {
		cs, err := readLog(v)
		if err != nil {
			return
		}
		again, err := readLog(logChanges(cs))
		if err != nil || len(again) != len(cs) {
			t.Fatalf("entry %x decodes to %+v, which encodes to an entry that decodes to %+v, %v", v, cs, again, err)
		}
		for i := range cs {
			a, b := cs[i], again[i]
			if a.op != b.op || a.typeID != b.typeID || !bytes.Equal(a.rec, b.rec) || !bytes.Equal(a.old, b.old) || a.index != b.index {
				t.Fatalf("change %d of %x: %+v, then %+v", i, v, a, b)
			}
		}
	})
}
