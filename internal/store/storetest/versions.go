package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// recKey returns the key of record i of a type: a key every store
// versions (the record span of the engine's layout).
func recKey(i int) []byte {
	return keyspace.AppendRecordKey(nil, 7, fmt.Appendf(nil, "r%04d", i))
}

// versioned numbers the batches a test commits as the engine does: a
// store that numbers its own (Position) gives its number, any other the
// sequence told with Stamp.
type versioned struct {
	kv  store.KV
	seq uint64
}

// commit applies and waits for a batch built by fill and returns its
// version: what every record it sets must report.
func (v *versioned) commit(t *testing.T, fill func(store.WriteBatch)) uint64 {
	t.Helper()
	b := v.kv.NewWriteBatch()
	defer b.Close()
	v.seq++
	b.Stamp(v.seq)
	fill(b)
	if err := v.kv.ApplyBatch(b); err != nil {
		t.Fatalf("ApplyBatch: %v", err)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if p := b.Position(); p != 0 {
		v.seq = p
	}
	return v.seq
}

// wantVersion checks the value and version GetVersioned returns.
func wantVersion(t *testing.T, r store.View, k []byte, val string, ver uint64) {
	t.Helper()
	got, gotVer, found, err := r.GetVersioned(k, nil)
	if err != nil {
		t.Fatalf("GetVersioned(%q): %v", k, err)
	}
	if found != (ver != 0) || string(got) != val || gotVer != ver {
		t.Fatalf("GetVersioned(%q) = %q, version %d, found %v; want %q, version %d", k, got, gotVer, found, val, ver)
	}
	if plain, found, err := r.Get(k, nil); err != nil || found != (ver != 0) || string(plain) != val {
		t.Fatalf("Get(%q) = %q, %v, %v; want %q: the bytes written, without their version", k, plain, found, err, val)
	}
}

// A record's version is the number of the batch that last wrote it: the
// same for every record of a batch, greater for a later batch, unchanged by
// batches that do not write it, 0 once deleted; the value read beside it
// is the bytes written. Snapshots and iterators read the versions of their
// own state.
func testVersions(t *testing.T, b Backend) {
	kv := b.Open(t)
	v := &versioned{kv: kv}
	wantVersion(t, kv, recKey(1), "", 0)
	v1 := v.commit(t, func(w store.WriteBatch) {
		w.Set(recKey(1), []byte("one"))
		w.Set(recKey(2), []byte("two"))
		w.Set(recKey(3), nil) // an empty record is present
	})
	if v1 == 0 {
		t.Fatal("the first batch has version 0, which means absent")
	}
	wantVersion(t, kv, recKey(1), "one", v1)
	wantVersion(t, kv, recKey(2), "two", v1)
	wantVersion(t, kv, recKey(3), "", v1)
	snap, err := kv.OpenSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	v2 := v.commit(t, func(w store.WriteBatch) {
		w.Set(recKey(2), []byte("deux"))
		w.Delete(recKey(3))
		w.Set([]byte("meta"), []byte("not a record"))
	})
	if v2 <= v1 {
		t.Fatalf("the second batch's version %d is not above the first's %d", v2, v1)
	}
	wantVersion(t, kv, recKey(1), "one", v1)
	wantVersion(t, kv, recKey(2), "deux", v2)
	wantVersion(t, kv, recKey(3), "", 0)
	wantVersion(t, snap, recKey(2), "two", v1)
	wantVersion(t, snap, recKey(3), "", v1)

	testIteratorVersions(t, kv, snap, v1, v2)
}

// testIteratorVersions checks Version beside Value in both directions and
// after Lookup, at the latest state and at the snapshot taken between the
// two batches.
func testIteratorVersions(t *testing.T, kv store.KV, snap store.ReadSnapshot, v1, v2 uint64) {
	t.Helper()
	lo, hi := recKey(0), recKey(9)
	for _, tc := range []struct {
		name string
		r    store.View
		want []string
	}{
		{"latest", kv, []string{fmt.Sprint("one@", v1), fmt.Sprint("deux@", v2)}},
		{"snapshot", snap, []string{fmt.Sprint("one@", v1), fmt.Sprint("two@", v1), fmt.Sprint("@", v1)}},
	} {
		it, err := tc.r.NewIterator(lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		var fwd, back []string
		for ok := it.First(); ok; ok = it.Next() {
			fwd = append(fwd, fmt.Sprint(string(it.Value()), "@", it.Version()))
		}
		for ok := it.Last(); ok; ok = it.Prev() {
			back = append([]string{fmt.Sprint(string(it.Value()), "@", it.Version())}, back...)
		}
		equal(t, tc.name+" forward", fwd, tc.want)
		equal(t, tc.name+" backward", back, tc.want)
		if err := it.Prefetch([][]byte{recKey(2)}); err != nil {
			t.Fatal(err)
		}
		for _, k := range [][]byte{recKey(2), recKey(1)} { // prefetched, then not
			val, found, err := it.Lookup(k, nil)
			if err != nil || !found {
				t.Fatalf("%s: Lookup(%q): %v, %v", tc.name, k, found, err)
			}
			got := fmt.Sprint(string(val), "@", it.Version())
			if i := map[string]int{string(recKey(1)): 0, string(recKey(2)): 1}[string(k)]; got != tc.want[i] {
				t.Errorf("%s: Lookup(%q) then Version = %s, want %s", tc.name, k, got, tc.want[i])
			}
		}
		if _, found, _ := it.Lookup(recKey(8), nil); found || it.Version() != 0 {
			t.Errorf("%s: Version after a Lookup that found nothing = %d, want 0", tc.name, it.Version())
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A record version read with GetVersioned is a precondition a batch can
// carry (Expect) on a store that enforces them: the batch fails when the
// record was rewritten or removed since, or, expected at 0, written.
func testConflictVersion(t *testing.T, b Backend) {
	kv := b.Open(t)
	v := &versioned{kv: kv}
	v.commit(t, func(w store.WriteBatch) { w.Set(recKey(1), []byte("1")) })
	expect := func(k []byte) func(store.WriteBatch) {
		return func(w store.WriteBatch) {
			_, ver, _, err := kv.GetVersioned(k, nil)
			if err != nil {
				t.Fatal(err)
			}
			w.Expect(k, ver)
		}
	}
	conflict(t, kv, expect(recKey(1)), func(w store.WriteBatch) { w.Set(recKey(1), []byte("1")) })
	conflict(t, kv, expect(recKey(1)), func(w store.WriteBatch) { w.Delete(recKey(1)) })
	conflict(t, kv, expect(recKey(2)), func(w store.WriteBatch) { w.Set(recKey(2), []byte("2")) })
}

// A batch that writes nothing still checks its preconditions on a store
// that enforces them: ApplyBatch fails with ErrConflict once what it read
// changed, and succeeds while it holds. A pure check (a read-only
// transaction's commit) relies on it.
func testConflictNoWrites(t *testing.T, b Backend) {
	kv := b.Open(t)
	v := &versioned{kv: kv}
	v.commit(t, func(w store.WriteBatch) { w.Set(recKey(1), []byte("1")) })
	check := func() store.WriteBatch {
		w := kv.NewWriteBatch()
		_, ver, _, err := kv.GetVersioned(recKey(1), nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Expect(recKey(1), ver)
		if _, _, err := w.Read(recKey(2), nil, true); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := check()
	defer w.Close()
	if err := kv.ApplyBatch(w); err != nil {
		t.Fatalf("ApplyBatch of a batch without writes whose preconditions hold: %v", err)
	}
	for _, interfere := range []func(store.WriteBatch){
		func(w store.WriteBatch) { w.Set(recKey(1), []byte("1")) },
		func(w store.WriteBatch) { w.Set(recKey(2), []byte("2")) },
	} {
		w := check()
		v.commit(t, interfere)
		if err := kv.ApplyBatch(w); !errors.Is(err, store.ErrConflict) {
			t.Errorf("ApplyBatch of a batch without writes after what it read changed: %v, want ErrConflict", err)
		}
		w.Close()
		v.commit(t, func(w store.WriteBatch) { w.Delete(recKey(2)) })
	}
}
