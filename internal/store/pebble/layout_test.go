package pebble

import (
	"bytes"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
)

// The store's own keys are where stores have always kept them: under the
// engine's layout, the mark at 00 00 "index" and journal entry n at
// 00 00 "ixlog/" n(8 BE), both out of reach of iterators and range
// deletions.
func TestOwnKeys(t *testing.T) {
	fs := NewMemFS()
	s := openMemT(t, fs, "/d", Options{Sync: true})
	ix := append(keyspace.IndexPrefix(1), 'x')
	commitT(t, s, func(b *Batch) { b.Set(ix, []byte("entry")) })
	mark := []byte("\x00\x00index")
	entry := []byte("\x00\x00ixlog/\x00\x00\x00\x00\x00\x00\x00\x01")
	for _, k := range [][]byte{mark, entry} {
		if _, found, err := get(s.db, k, nil); err != nil || !found {
			t.Fatalf("the main instance has no key % x: %v", k, err)
		}
	}
	if got := scan(t, s, "", "", false); len(got) != 1 || got[0] != string(ix)+"=entry" {
		t.Fatalf("an iterator over every key shows %q, want the index entry only", got)
	}
	if n, ok := s.layout.journalEntry(entry); !ok || n != 1 {
		t.Fatalf("journalEntry(% x) = %d, %v; want 1", entry, n, ok)
	}
	for _, k := range [][]byte{mark, entry[:len(entry)-1], append(bytes.Clone(entry), 0)} {
		if _, ok := s.layout.journalEntry(k); ok {
			t.Errorf("journalEntry(% x) accepted a key that is not a journal entry", k)
		}
	}
	commitT(t, s, func(b *Batch) { b.DeleteRange(nil, keyspace.RecordPrefix(0)) })
	if _, found, err := get(s.db, mark, nil); err != nil || !found {
		t.Fatalf("a range deletion from the first key deleted the mark: %v", err)
	}
	if v, found, err := s.Get(ix, nil); err != nil || !found || string(v) != "entry" {
		t.Fatalf("index entry after a range deletion before it: %q %v %v", v, found, err)
	}
}

// badLayout is the engine's layout with another index span and prefix,
// and another record span when rec is set.
type badLayout struct {
	keyspace.Layout
	lower, upper, prefix []byte
	rec                  [][]byte
}

func (l badLayout) RecordSpan() (lower, upper []byte) {
	if l.rec == nil {
		return l.Layout.RecordSpan()
	}
	return l.rec[0], l.rec[1]
}

func (l badLayout) IndexSpan() (lower, upper []byte) { return l.lower, l.upper }
func (l badLayout) StorePrefix() []byte              { return l.prefix }

// A layout the store cannot work with is refused, naming what is wrong,
// before anything is written.
func TestOpenRefusesLayout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layout Layout
		want   string
	}{
		{"none", nil, "Options.Layout is nil"},
		{"empty index span", badLayout{lower: []byte{2}, upper: []byte{2}, prefix: []byte{0, 0}}, "index span is empty"},
		{"index span over the store's keys", badLayout{lower: []byte{0}, upper: []byte{3}, prefix: []byte{0, 0}}, "holds the store's own keys"},
		{"no prefix", badLayout{lower: []byte{2}, upper: []byte{3}}, "StorePrefix is empty"},
		{"records among the index entries", badLayout{lower: []byte{2}, upper: []byte{3}, prefix: []byte{0, 0}, rec: [][]byte{{1}, {2, 5}}}, "record span overlaps its index span"},
		{"records over the store's keys", badLayout{lower: []byte{2}, upper: []byte{3}, prefix: []byte{0, 0}, rec: [][]byte{{0}, {2}}}, "record span holds the store's own keys"},
		{"empty record span", badLayout{lower: []byte{2}, upper: []byte{3}, prefix: []byte{0, 0}, rec: [][]byte{{1}, {1}}}, "record span is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewMemFS()
			s, err := Open(Options{FS: fs, Dir: "/d", Layout: tc.layout})
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want it to say %q", err, tc.want)
			}
			if _, err := fs.fs.Stat("/d"); err == nil {
				t.Fatal("the refused Open created the directory")
			}
		})
	}
}
