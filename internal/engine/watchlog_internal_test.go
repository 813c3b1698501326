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
func readLog(v []byte) ([]logChange, error) { return readLogBy(v, (*logEntry).next) }

// readLogBy is readLog with the given reader of one change.
func readLogBy(v []byte, next func(*logEntry, *logChange) (bool, error)) ([]logChange, error) {
	le, err := parseLogEntry(v)
	if err != nil {
		return nil, err
	}
	var out []logChange
	for {
		var c logChange
		ok, err := next(&le, &c)
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
	f.Add(logChanges([]logChange{{op: changeUpdate, typeID: 200, rec: make([]byte, 127), old: make([]byte, 128)}, {op: changeInsert, typeID: 1}}))
	f.Add(append(appendLogHeader(nil), changeRemove, 1, 0, 5, 'a')) // old past the end
	f.Add(append(appendLogHeader(nil), 0, 1, 1, 'a', 0))            // op 0
	f.Add(append(appendLogHeader(nil), changeInsert, 1, 0x7f, 'a')) // record past the end
	f.Fuzz(func(t *testing.T, v []byte) {
		cs, err := readLog(v)
		// The fast path reads every entry as the slow one does.
		slow, serr := readLogBy(v, (*logEntry).nextSlow)
		if (err == nil) != (serr == nil) || !sameChanges(cs, slow) {
			t.Fatalf("entry %x: next reads %+v, %v; nextSlow %+v, %v", v, cs, err, slow, serr)
		}
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

func sameChanges(a, b []logChange) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].op != b[i].op || a[i].typeID != b[i].typeID || !bytes.Equal(a[i].rec, b[i].rec) ||
			!bytes.Equal(a[i].old, b[i].old) || a[i].index != b[i].index {
			return false
		}
	}
	return true
}

// BenchmarkLogEntry reads an entry of 1,000 inserts of ~100-byte records
// (the watch experiment's) change by change, by next and by nextSlow alone,
// in one invocation:
//
//	go test -run '^$' -bench LogEntry ./internal/engine/
func BenchmarkLogEntry(b *testing.B) {
	cs := make([]logChange, 1000)
	for i := range cs {
		cs[i] = logChange{op: changeInsert, typeID: 1, rec: itemRecord(int64(1<<40 + i))}
	}
	v := logChanges(cs)
	for _, c := range []struct {
		name string
		next func(*logEntry, *logChange) (bool, error)
	}{{"next", (*logEntry).next}, {"slow", (*logEntry).nextSlow}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(cs)))
			for b.Loop() {
				le, err := parseLogEntry(v)
				if err != nil {
					b.Fatal(err)
				}
				var ch logChange
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
