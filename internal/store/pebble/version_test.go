package pebble

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
)

// legacyStore copies testdata/store-before-versions, a store the release
// before record versions wrote through its server (a schema, four records
// of two types after inserts, an update and a removal), into a temporary
// directory and returns it.
func legacyStore(t *testing.T) string {
	t.Helper()
	src := filepath.Join("testdata", "store-before-versions")
	dst := filepath.Join(t.TempDir(), "data")
	err := os.CopyFS(dst, os.DirFS(src))
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// recordVersions returns the value and version of every record in s.
func recordVersions(t *testing.T, s *Store) map[string]uint64 {
	t.Helper()
	lo, hi := keyspace.Layout{}.RecordSpan()
	it, err := s.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	got := map[string]uint64{}
	for ok := it.First(); ok; ok = it.Next() {
		got[string(it.Key())] = it.Version()
		if v := it.Value(); len(v) == 0 || v[0] == versionFormat {
			t.Errorf("record %x reads as %x: not the bytes the client wrote", it.Key(), v)
		}
	}
	return got
}

func lastSeq(t *testing.T, s *Store) uint64 {
	t.Helper()
	v, found, err := s.Get([]byte(keyspace.SeqKey), nil)
	if err != nil || !found || len(v) != 8 {
		t.Fatalf("the commit sequence: %x, %v, %v", v, found, err)
	}
	return binary.BigEndian.Uint64(v)
}

// A store written before versions existed opens: its records read as
// written and report the commit sequence of the first open by this
// release, which no later write's version is below and which is not 0;
// the floor is recorded then, so it stays put while later batches advance
// the sequence.
func TestVersionsOfStoreBeforeVersions(t *testing.T) {
	dir := legacyStore(t)
	ro, err := Open(Options{Dir: dir, Layout: keyspace.Layout{}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	seq := lastSeq(t, ro)
	if seq == 0 || ro.recs.floor != seq {
		t.Fatalf("read-only open: floor %d, last commit %d; want the last commit, above 0", ro.recs.floor, seq)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(Options{Dir: dir, Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	before := recordVersions(t, s)
	if len(before) != 4 {
		t.Fatalf("%d records, want the 4 the earlier release left", len(before))
	}
	for k, v := range before {
		if v != seq {
			t.Errorf("record %x: version %d, want the floor %d", k, v, seq)
		}
	}
	// A batch as the engine writes one: stamped with the next commit,
	// which it also records as the last.
	var updated string
	for k := range before {
		updated = k
		break
	}
	b := s.NewBatch()
	b.Stamp(seq + 1)
	b.Set([]byte(updated), []byte{0x08, 0x01})
	b.Set([]byte(keyspace.SeqKey), binary.BigEndian.AppendUint64(nil, seq+1))
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(Options{Dir: dir, Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after := recordVersions(t, s)
	for k, v := range after {
		want := seq
		if k == updated {
			want = seq + 1
		}
		if v != want {
			t.Errorf("after reopening, record %x: version %d, want %d", k, v, want)
		}
	}
}

// A batch that sets a record without being told its version is refused
// whole: a record must never read as version 0, which means absent.
func TestUnstampedRecordsRefused(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := keyspace.AppendRecordKey(nil, 1, []byte("pk"))
	b := s.NewBatch()
	defer b.Close()
	b.Set([]byte("\x00meta"), []byte("m"))
	b.Set(rec, []byte{0x08, 0x01})
	if err := s.Apply(b); err == nil || !strings.Contains(err.Error(), "not stamped") {
		t.Fatalf("Apply of an unstamped batch: %v, want a refusal naming the stamp", err)
	}
	if _, found, _ := s.Get([]byte("\x00meta"), nil); found {
		t.Fatal("part of a refused batch was applied")
	}
	if _, found, _ := s.Get(rec, nil); found {
		t.Fatal("the refused batch's record was applied")
	}
}

// Only records lose their header on reads: a meta value that starts with
// 00, as the commit sequence does, reads whole through iterators bounded
// inside the record span, outside it, across it and re-bounded.
func TestOnlyRecordsCarryVersions(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := keyspace.AppendRecordKey(nil, 1, []byte("pk"))
	meta := []byte(keyspace.SeqKey)
	b := s.NewBatch()
	defer b.Close()
	b.Stamp(9)
	b.Set(meta, binary.BigEndian.AppendUint64(nil, 9))
	b.Set(rec, []byte{0x08, 0x01})
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{string(meta): "0000000000000009@0", string(rec): "0801@9"}
	lo, hi := keyspace.Layout{}.RecordSpan()
	for _, bounds := range [][2][]byte{{nil, nil}, {lo, hi}, {meta, lo}, {rec, nil}} {
		it, err := s.NewIter(bounds[0], bounds[1])
		if err != nil {
			t.Fatal(err)
		}
		for pass := range 2 {
			for ok := it.First(); ok; ok = it.Next() {
				got := fmt.Sprintf("%x@%d", it.Value(), it.Version())
				if got != want[string(it.Key())] {
					t.Errorf("bounds %x, pass %d: %x reads %s, want %s", bounds, pass, it.Key(), got, want[string(it.Key())])
				}
			}
			it.SetBounds(nil, nil)
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
