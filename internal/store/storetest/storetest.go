// Package storetest is the conformance suite of the storage contract
// (internal/store's KV): the same tests run against every implementation,
// so a backend that passes them gives the engine what it relies on.
package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/protobase/protobase/internal/store"
)

// Backend is one implementation under test.
type Backend struct {
	Name string
	// Open returns an empty store that the test may use until it ends.
	Open func(t *testing.T) store.KV
	// SharedWriters says other processes may write the store, so the
	// store itself enforces batch preconditions (etcd). A single-process
	// store (Pebble) relies on its one writer's lock instead, and the
	// conflict tests do not apply to it.
	SharedWriters bool
}

// Run runs the suite against b.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(*testing.T, Backend)
		// shared: only for stores with SharedWriters.
		shared bool
	}{
		{"SetGetDelete", testSetGetDelete, false},
		{"DeleteRange", testDeleteRange, false},
		{"LastWriteWins", testLastWriteWins, false},
		{"IterateBothWays", testIterate, false},
		{"Lookup", testLookup, false},
		{"SnapshotIsolation", testSnapshot, false},
		{"ReadThroughBatch", testBatchRead, false},
		{"RecordVersions", testVersions, false},
		{"Entries", testEntries, false},
		{"ConflictAbsent", testConflictAbsent, true},
		{"ConflictUnchanged", testConflictUnchanged, true},
		{"ConflictRange", testConflictRange, true},
		{"ConflictVersion", testConflictVersion, true},
		{"ConflictNoWrites", testConflictNoWrites, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.shared && !b.SharedWriters {
				t.Skipf("%s has one writer per store: preconditions hold by its lock", b.Name)
			}
			tc.fn(t, b)
		})
	}
}

// commit applies and waits for a batch built by fill.
func commit(t *testing.T, kv store.KV, fill func(store.WriteBatch)) {
	t.Helper()
	b := kv.NewWriteBatch()
	defer b.Close()
	fill(b)
	if err := kv.ApplyBatch(b); err != nil {
		t.Fatalf("ApplyBatch: %v", err)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func mustGet(t *testing.T, r store.View, key string) (string, bool) {
	t.Helper()
	v, found, err := r.Get([]byte(key), nil)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(v), found
}

func key(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }

func testSetGetDelete(t *testing.T, b Backend) {
	kv := b.Open(t)
	commit(t, kv, func(w store.WriteBatch) {
		w.Set([]byte("a"), []byte("1"))
		w.Set([]byte("b"), []byte("2"))
		w.Set([]byte("c"), nil)
	})
	for k, want := range map[string]string{"a": "1", "b": "2", "c": ""} {
		if v, found := mustGet(t, kv, k); !found || v != want {
			t.Errorf("Get(%q) = %q, %v; want %q, true", k, v, found, want)
		}
	}
	if _, found, err := kv.GetLikelyMissing([]byte("zz"), nil); err != nil || found {
		t.Errorf("GetLikelyMissing(zz) = %v, %v; want absent", found, err)
	}
	commit(t, kv, func(w store.WriteBatch) { w.Delete([]byte("a")) })
	if _, found := mustGet(t, kv, "a"); found {
		t.Error("a still present after Delete")
	}
	empty := kv.NewWriteBatch()
	defer empty.Close()
	if !empty.Empty() {
		t.Error("a new batch is not Empty")
	}
	if err := kv.ApplyBatch(empty); err != nil {
		t.Errorf("ApplyBatch(empty): %v", err)
	}
}

// A batch that writes one key twice leaves the last write.
func testLastWriteWins(t *testing.T, b Backend) {
	kv := b.Open(t)
	commit(t, kv, func(w store.WriteBatch) { w.Set([]byte("c"), []byte("0")) })
	commit(t, kv, func(w store.WriteBatch) {
		w.Set([]byte("a"), []byte("1"))
		w.Set([]byte("a"), []byte("2"))
		w.Delete([]byte("b"))
		w.Set([]byte("b"), []byte("3"))
		w.Set([]byte("c"), []byte("4"))
		w.Delete([]byte("c"))
	})
	for k, want := range map[string]string{"a": "2", "b": "3"} {
		if v, found := mustGet(t, kv, k); !found || v != want {
			t.Errorf("Get(%q) = %q, %v; want %q", k, v, found, want)
		}
	}
	if _, found := mustGet(t, kv, "c"); found {
		t.Error("c present: its delete came last")
	}
}

func testDeleteRange(t *testing.T, b Backend) {
	kv := b.Open(t)
	commit(t, kv, func(w store.WriteBatch) {
		for i := range 10 {
			w.Set(key(i), []byte("v"))
		}
	})
	commit(t, kv, func(w store.WriteBatch) { w.DeleteRange(key(3), key(7)) })
	for i := range 10 {
		_, found := mustGet(t, kv, string(key(i)))
		if want := i < 3 || i >= 7; found != want {
			t.Errorf("%s present = %v, want %v", key(i), found, want)
		}
	}
}

// collect walks it from the position pos set, in the given direction.
func collect(t *testing.T, it store.Iterator, ok, reverse bool) []string {
	t.Helper()
	var out []string
	for ; ok; ok = step(it, reverse) {
		out = append(out, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Error(); err != nil {
		t.Fatalf("iterate: %v", err)
	}
	return out
}

func step(it store.Iterator, reverse bool) bool {
	if reverse {
		return it.Prev()
	}
	return it.Next()
}

func want(lo, hi int, reverse bool) []string {
	var out []string
	for i := lo; i < hi; i++ {
		out = append(out, fmt.Sprintf("%s=v%d", key(i), i))
	}
	if reverse {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got  %v\n want %v", what, got, want)
	}
}

func testIterate(t *testing.T, b Backend) {
	kv := b.Open(t)
	const n = 50 // more than one page of a paging backend in the tests
	commit(t, kv, func(w store.WriteBatch) {
		for i := range n {
			w.Set(key(i), fmt.Appendf(nil, "v%d", i))
		}
		w.Set([]byte("\x00meta"), []byte("m"))
	})
	it, err := kv.NewIterator(key(0), key(n))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	equal(t, "First..Next", collect(t, it, it.First(), false), want(0, n, false))
	equal(t, "Last..Prev", collect(t, it, it.Last(), true), want(0, n, true))
	equal(t, "SeekGE(k0010)", collect(t, it, it.SeekGE(key(10)), false), want(10, n, false))
	equal(t, "SeekLT(k0010)", collect(t, it, it.SeekLT(key(10)), true), want(0, 10, true))
	equal(t, "SeekGE past the end", collect(t, it, it.SeekGE([]byte("z")), false), nil)
	equal(t, "SeekLT before the start", collect(t, it, it.SeekLT([]byte("a")), true), nil)

	// Changing direction mid-way.
	if !it.SeekGE(key(20)) || !it.Next() || !it.Prev() || !it.Prev() || string(it.Key()) != string(key(19)) {
		t.Errorf("SeekGE(20) Next Prev Prev: at %q (valid %v), want %s", it.Key(), it.Valid(), key(19))
	}
	if !it.SeekLT(key(30)) || !it.Next() || string(it.Key()) != string(key(30)) {
		t.Errorf("SeekLT(30) Next: at %q (valid %v), want %s", it.Key(), it.Valid(), key(30))
	}

	it.SetBounds(key(5), key(8))
	equal(t, "SetBounds [5,8)", collect(t, it, it.First(), false), want(5, 8, false))
	equal(t, "SetBounds [5,8) reverse", collect(t, it, it.Last(), true), want(5, 8, true))
	equal(t, "SeekGE below the lower bound", collect(t, it, it.SeekGE(key(0)), false), want(5, 8, false))
	it.SetBounds(key(n-3), nil)
	equal(t, "upper nil", collect(t, it, it.First(), false), want(n-3, n, false))
	// An empty upper bound is one (no key is below it); nil is none.
	it.SetBounds(nil, []byte{})
	equal(t, "SetBounds(nil, empty)", collect(t, it, it.First(), false), nil)
	equal(t, "SetBounds(nil, empty) reverse", collect(t, it, it.Last(), true), nil)
	none, err := kv.NewIterator([]byte{}, []byte{})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	equal(t, "NewIterator(empty, empty)", collect(t, none, none.First(), false), nil)
	equal(t, "NewIterator(empty, empty) reverse", collect(t, none, none.Last(), true), nil)

	all, err := kv.NewIterator(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	if !all.First() || string(all.Key()) != "\x00meta" {
		t.Errorf("unbounded First at %q, want the meta key", all.Key())
	}
	if !all.Last() || string(all.Key()) != string(key(n-1)) {
		t.Errorf("unbounded Last at %q, want %s", all.Key(), key(n-1))
	}
}

func testLookup(t *testing.T, b Backend) {
	kv := b.Open(t)
	commit(t, kv, func(w store.WriteBatch) {
		w.Set([]byte("a"), []byte("1"))
		w.Set([]byte("b"), []byte("2"))
	})
	it, err := kv.NewIterator(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for _, tc := range []struct {
		k, v  string
		found bool
	}{{"a", "1", true}, {"ab", "", false}, {"b", "2", true}, {"0", "", false}} {
		v, found, err := it.Lookup([]byte(tc.k), nil)
		if err != nil || found != tc.found || string(v) != tc.v {
			t.Errorf("Lookup(%q) = %q, %v, %v; want %q, %v", tc.k, v, found, err, tc.v, tc.found)
		}
	}
	// The iterator's version is fixed: a later write is not seen.
	commit(t, kv, func(w store.WriteBatch) { w.Set([]byte("c"), []byte("3")) })
	if _, found, _ := it.Lookup([]byte("c"), nil); found {
		t.Error("Lookup saw a key written after the iterator's first read")
	}
	// Prefetched lookups read the same version, hits and misses alike.
	var keys [][]byte
	for i := range 300 { // more than one transaction of a store that groups them
		keys = append(keys, key(i))
	}
	keys = append(keys, []byte("a"), []byte("c"))
	if err := it.Prefetch(keys); err != nil {
		t.Fatalf("Prefetch: %v", err)
	}
	for _, tc := range []struct {
		k, v  string
		found bool
	}{{"a", "1", true}, {"c", "", false}, {"b", "2", true}, {string(key(7)), "", false}} {
		v, found, err := it.Lookup([]byte(tc.k), nil)
		if err != nil || found != tc.found || string(v) != tc.v {
			t.Errorf("Lookup(%q) after Prefetch = %q, %v, %v; want %q, %v", tc.k, v, found, err, tc.v, tc.found)
		}
	}
	fresh, err := kv.NewIterator(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Prefetch(keys); err != nil {
		t.Fatalf("Prefetch on a new iterator: %v", err)
	}
	if v, found, err := fresh.Lookup([]byte("c"), nil); err != nil || !found || string(v) != "3" {
		t.Errorf("Lookup(c) through a new iterator = %q, %v, %v; want 3", v, found, err)
	}
}

func testSnapshot(t *testing.T, b Backend) {
	kv := b.Open(t)
	commit(t, kv, func(w store.WriteBatch) { w.Set([]byte("a"), []byte("old")) })
	snap, err := kv.OpenSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	commit(t, kv, func(w store.WriteBatch) {
		w.Set([]byte("a"), []byte("new"))
		w.Set([]byte("b"), []byte("new"))
	})
	if v, _ := mustGet(t, snap, "a"); v != "old" {
		t.Errorf("snapshot Get(a) = %q, want old", v)
	}
	if _, found := mustGet(t, snap, "b"); found {
		t.Error("snapshot sees b, written after it")
	}
	it, err := snap.NewIterator(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	equal(t, "snapshot iteration", collect(t, it, it.First(), false), []string{"a=old"})
	if v, _ := mustGet(t, kv, "a"); v != "new" {
		t.Errorf("latest Get(a) = %q, want new", v)
	}
}

func testBatchRead(t *testing.T, b Backend) {
	kv := b.Open(t)
	commit(t, kv, func(w store.WriteBatch) { w.Set(key(5), []byte("v")) })
	w := kv.NewWriteBatch()
	defer w.Close()
	if v, found, err := w.Read(key(5), nil, false); err != nil || !found || string(v) != "v" {
		t.Errorf("Read(k0005) = %q, %v, %v", v, found, err)
	}
	if _, found, err := w.Read(key(6), nil, true); err != nil || found {
		t.Errorf("Read(k0006) = %v, %v; want absent", found, err)
	}
	if ok, err := w.ReadAbsent(key(0), key(5)); err != nil || !ok {
		t.Errorf("ReadAbsent[0,5) = %v, %v; want true", ok, err)
	}
	if ok, err := w.ReadAbsent(key(0), key(6)); err != nil || ok {
		t.Errorf("ReadAbsent[0,6) = %v, %v; want false", ok, err)
	}
	w.Set(key(6), []byte("w"))
	if err := kv.ApplyBatch(w); err != nil {
		t.Fatalf("ApplyBatch with preconditions that hold: %v", err)
	}
	if err := w.Wait(); err != nil {
		t.Fatal(err)
	}
	if v, _ := mustGet(t, kv, string(key(6))); v != "w" {
		t.Errorf("Get(k0006) = %q after the batch", v)
	}
}

// conflict reads through a batch (read), lets another writer apply
// (interfere), then expects the batch to fail with ErrConflict and apply
// nothing; after a Reset (which forgets the preconditions) it applies.
func conflict(t *testing.T, kv store.KV, read func(store.WriteBatch), interfere func(store.WriteBatch)) {
	t.Helper()
	w := kv.NewWriteBatch()
	defer w.Close()
	read(w)
	w.Set([]byte("marker"), []byte("1"))
	commit(t, kv, interfere)
	if err := kv.ApplyBatch(w); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ApplyBatch after another writer changed what it read: %v, want ErrConflict", err)
	}
	if _, found := mustGet(t, kv, "marker"); found {
		t.Fatal("a batch that failed its preconditions applied a write")
	}
	w.Reset()
	w.Set([]byte("marker"), []byte("1"))
	if err := kv.ApplyBatch(w); err != nil {
		t.Fatalf("ApplyBatch after Reset: %v", err)
	}
	commit(t, kv, func(w store.WriteBatch) { w.Delete([]byte("marker")) })
}

func testConflictAbsent(t *testing.T, b Backend) {
	kv := b.Open(t)
	conflict(t, kv, func(w store.WriteBatch) {
		if _, found, err := w.Read([]byte("x"), nil, true); err != nil || found {
			t.Fatalf("Read(x) = %v, %v", found, err)
		}
	}, func(w store.WriteBatch) { w.Set([]byte("x"), nil) })
}

func testConflictUnchanged(t *testing.T, b Backend) {
	kv := b.Open(t)
	commit(t, kv, func(w store.WriteBatch) { w.Set([]byte("x"), []byte("1")) })
	read := func(w store.WriteBatch) {
		if _, found, err := w.Read([]byte("x"), nil, false); err != nil || !found {
			t.Fatalf("Read(x) = %v, %v", found, err)
		}
	}
	// Rewritten with the same value still counts as changed.
	conflict(t, kv, read, func(w store.WriteBatch) { w.Set([]byte("x"), []byte("1")) })
	conflict(t, kv, read, func(w store.WriteBatch) { w.Delete([]byte("x")) })
}

func testConflictRange(t *testing.T, b Backend) {
	kv := b.Open(t)
	conflict(t, kv, func(w store.WriteBatch) {
		if ok, err := w.ReadAbsent(key(0), key(10)); err != nil || !ok {
			t.Fatalf("ReadAbsent = %v, %v", ok, err)
		}
	}, func(w store.WriteBatch) { w.Set(key(9), nil) })
}
