package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// testLayout is the engine's key space, which the server opens every store
// with.
var testLayout = keyspace.Layout{}

// openT opens a store in dir and closes it at the end of the test (unless the
// test closed it already).
func openT(t *testing.T, dir string, syncWrites bool) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Layout: testLayout, Sync: syncWrites, CacheBytes: 8 << 20, MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func commitT(t *testing.T, s *Store, fill func(b *Batch)) {
	t.Helper()
	b := s.NewBatch()
	b.Stamp(1)
	defer b.Close()
	fill(b)
	if err := s.Commit(b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// mustGet reads key with both Get and GetLikelyMissing and checks they agree.
func mustGet(t *testing.T, r Reader, key string) (string, bool) {
	t.Helper()
	v, ok, err := r.Get([]byte(key), nil)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	v2, ok2, err := r.GetLikelyMissing([]byte(key), nil)
	if err != nil {
		t.Fatalf("GetLikelyMissing(%q): %v", key, err)
	}
	if ok != ok2 || string(v) != string(v2) {
		t.Fatalf("Get(%q) = %q, %v but GetLikelyMissing = %q, %v", key, v, ok, v2, ok2)
	}
	return string(v), ok
}

func wantValue(t *testing.T, r Reader, key, want string) {
	t.Helper()
	got, ok := mustGet(t, r, key)
	if !ok {
		t.Fatalf("Get(%q): not found, want %q", key, want)
	}
	if got != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func wantMissing(t *testing.T, r Reader, key string) {
	t.Helper()
	if got, ok := mustGet(t, r, key); ok {
		t.Fatalf("Get(%q) = %q, want not found", key, got)
	}
}

// scan returns "k=v" pairs of an iterator over [lower, upper), forward or
// backward.
func scan(t *testing.T, r Reader, lower, upper string, reverse bool) []string {
	t.Helper()
	var lo, hi []byte
	if lower != "" {
		lo = []byte(lower)
	}
	if upper != "" {
		hi = []byte(upper)
	}
	it, err := r.NewIter(lo, hi)
	if err != nil {
		t.Fatalf("NewIter: %v", err)
	}
	var out []string
	if reverse {
		for ok := it.Last(); ok; ok = it.Prev() {
			out = append(out, string(it.Key())+"="+string(it.Value()))
		}
	} else {
		for ok := it.First(); ok; ok = it.Next() {
			out = append(out, string(it.Key())+"="+string(it.Value()))
		}
	}
	if err := it.Error(); err != nil {
		t.Fatalf("iterate: %v", err)
	}
	if err := it.Close(); err != nil {
		t.Fatalf("Iter.Close: %v", err)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSetGetDelete(t *testing.T) {
	s := openT(t, t.TempDir(), true)
	wantMissing(t, s, "a")

	key, val := []byte("a"), []byte("1")
	commitT(t, s, func(b *Batch) {
		b.Set(key, val)
		b.Set([]byte("b"), []byte("2"))
		b.Set([]byte("empty"), nil)
		// Pebble copies: reusing the caller's buffers must not change the batch.
		key[0], val[0] = 'z', '9'
	})
	wantValue(t, s, "a", "1")
	wantValue(t, s, "b", "2")
	wantValue(t, s, "empty", "")
	wantMissing(t, s, "z")

	// Get appends to dst[:0] and reuses its capacity.
	dst := make([]byte, 3, 64)
	v, ok, err := s.Get([]byte("b"), dst)
	if err != nil || !ok || string(v) != "2" || &v[0] != &dst[:1][0] {
		t.Fatalf("Get with dst = %q, %v, %v (reused=%v)", v, ok, err, err == nil && ok && &v[0] == &dst[:1][0])
	}
	v, ok, err = s.Get([]byte("nope"), dst)
	if err != nil || ok || len(v) != 0 {
		t.Fatalf("Get missing with dst = %q, %v, %v", v, ok, err)
	}

	commitT(t, s, func(b *Batch) { b.Set([]byte("a"), []byte("1b")) })
	wantValue(t, s, "a", "1b")

	commitT(t, s, func(b *Batch) { b.Delete([]byte("a")) })
	wantMissing(t, s, "a")
	wantValue(t, s, "b", "2")
}

func TestDeleteRange(t *testing.T) {
	s := openT(t, t.TempDir(), true)
	commitT(t, s, func(b *Batch) {
		for _, k := range []string{"a", "b1", "b2", "b3", "c"} {
			b.Set([]byte(k), []byte("v"+k))
		}
	})
	// Flush half of the data so the range deletion covers both sstables and
	// the memtable.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	commitT(t, s, func(b *Batch) { b.Set([]byte("b4"), []byte("vb4")) })

	commitT(t, s, func(b *Batch) { b.DeleteRange([]byte("b"), []byte("c")) })
	for _, k := range []string{"b1", "b2", "b3", "b4"} {
		wantMissing(t, s, k)
	}
	wantValue(t, s, "a", "va")
	wantValue(t, s, "c", "vc") // end is exclusive
	if got, want := scan(t, s, "", "", false), []string{"a=va", "c=vc"}; !equal(got, want) {
		t.Fatalf("scan after DeleteRange = %v, want %v", got, want)
	}

	// Writes after the range deletion are visible again.
	commitT(t, s, func(b *Batch) { b.Set([]byte("b2"), []byte("new")) })
	wantValue(t, s, "b2", "new")
}

func TestBatchBasics(t *testing.T) {
	s := openT(t, t.TempDir(), true)
	b := s.NewBatch()
	b.Stamp(1)
	defer b.Close()
	if !b.Empty() || b.Count() != 0 {
		t.Fatalf("new batch: Empty=%v Count=%d", b.Empty(), b.Count())
	}
	empty := b.Len()
	b.Set([]byte("k1"), []byte("v1"))
	b.Delete([]byte("k2"))
	b.DeleteRange([]byte("x"), []byte("y"))
	if b.Empty() || b.Count() != 3 || b.Len() <= empty {
		t.Fatalf("batch: Empty=%v Count=%d Len=%d", b.Empty(), b.Count(), b.Len())
	}

	// Nothing is visible before Apply.
	wantMissing(t, s, "k1")
	if err := b.Wait(); !errors.Is(err, store.ErrBatchNotApplied) {
		t.Fatalf("Wait before Apply = %v, want ErrBatchNotApplied", err)
	}

	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, "k1", "v1") // visible after Apply, before Wait
	if err := s.Apply(b); !errors.Is(err, ErrBatchApplied) {
		t.Fatalf("second Apply = %v, want ErrBatchApplied", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Set after Apply did not panic")
			}
		}()
		b.Set([]byte("late"), nil)
	}()
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil { // idempotent
		t.Fatal(err)
	}

	// Reset allows reuse, even without a prior Wait.
	b.Reset()
	if !b.Empty() {
		t.Fatal("batch not empty after Reset")
	}
	b.Set([]byte("k3"), []byte("v3"))
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	b.Reset() // waits for the pending sync internally
	b.Set([]byte("k4"), []byte("v4"))
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, "k3", "v3")
	wantValue(t, s, "k4", "v4")

	// An empty batch commits as a no-op.
	b.Reset()
	if err := s.Commit(b); err != nil {
		t.Fatalf("empty Commit: %v", err)
	}

	b.Close()
	b.Close() // idempotent
	if err := s.Apply(b); !errors.Is(err, ErrBatchClosed) {
		t.Fatalf("Apply closed batch = %v, want ErrBatchClosed", err)
	}

	// A batch from another store is rejected.
	other := openT(t, t.TempDir(), true)
	ob := other.NewBatch()
	ob.Stamp(1)
	defer ob.Close()
	ob.Set([]byte("x"), nil)
	if err := s.Apply(ob); err == nil {
		t.Fatal("Apply of another store's batch succeeded")
	}
}

// TestBatchAtomicity checks that readers never observe a partially applied
// batch: every batch rewrites all keys with the same generation, and a
// concurrent reader checks, through snapshots and iterators (both
// point-in-time views), that all keys always carry one generation.
func TestBatchAtomicity(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	const keys, gens = 50, 300
	write := func(gen int) {
		b := s.NewBatch()
		b.Stamp(1)
		defer b.Close()
		for k := range keys {
			b.Set(fmt.Appendf(nil, "k%03d", k), fmt.Appendf(nil, "%06d", gen))
		}
		if err := s.Commit(b); err != nil {
			t.Error(err)
		}
	}
	write(0)

	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			var r Reader = s
			var snap *Snapshot
			if i%2 == 0 {
				snap = s.NewSnapshot()
				r = snap
			}
			it, err := r.NewIter(nil, nil)
			if err != nil {
				errc <- err
				return
			}
			n, first := 0, ""
			for ok := it.First(); ok; ok = it.Next() {
				v := string(it.Value())
				if n == 0 {
					first = v
				} else if v != first {
					errc <- fmt.Errorf("torn batch: key %s has gen %s, first key has %s", it.Key(), v, first)
					it.Close()
					return
				}
				n++
			}
			it.Close()
			if snap != nil {
				// Point gets at the snapshot agree with its iterator.
				v, _, err := snap.Get([]byte("k049"), nil)
				if err != nil || string(v) != first {
					errc <- fmt.Errorf("snapshot Get = %q, %w; iterator saw %q", v, err, first)
					return
				}
				snap.Close()
			}
			if n != keys {
				errc <- fmt.Errorf("saw %d keys, want %d", n, keys)
				return
			}
		}
	}()
	for gen := 1; gen <= gens; gen++ {
		write(gen)
	}
	close(done)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}

// TestGetLikelyMissingCompacted exercises both point-read paths once all data
// sits in L6, where only GetLikelyMissing consults bloom filters.
func TestGetLikelyMissingCompacted(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	commitT(t, s, func(b *Batch) {
		for i := range 2000 {
			b.Set(fmt.Appendf(nil, "k%d", 2*i), fmt.Appendf(nil, "v%d", 2*i))
		}
		b.Delete([]byte("k100"))
	})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), []byte("k"), []byte("l"), false); err != nil {
		t.Fatal(err)
	}
	if m := s.Metrics(); m.L0Tables != 0 || m.Tables == 0 {
		t.Fatalf("after compaction: %v", m)
	}
	wantValue(t, s, "k10", "v10")
	wantValue(t, s, "k3998", "v3998")
	wantMissing(t, s, "k100")    // deleted
	wantMissing(t, s, "k1")      // prefix of existing keys
	wantMissing(t, s, "k101")    // odd ids were never written
	wantMissing(t, s, "k10\x00") // extension of an existing key
	wantMissing(t, s, "a")
	wantMissing(t, s, "z")
	before := s.Metrics().FilterHits
	dst := make([]byte, 0, 64)
	for i := range 500 {
		var ok bool
		var err error
		dst, ok, err = s.GetLikelyMissing(fmt.Appendf(nil, "k%d", 2*i+1), dst)
		if err != nil || ok {
			t.Fatalf("GetLikelyMissing(odd) = %v, %v", ok, err)
		}
	}
	if hits := s.Metrics().FilterHits - before; hits < 450 {
		t.Errorf("GetLikelyMissing on L6: %d bloom filter hits for 500 missing keys", hits)
	}
	// Recently written data in the memtable is seen too.
	commitT(t, s, func(b *Batch) { b.Set([]byte("k1"), []byte("new")) })
	wantValue(t, s, "k1", "new")
}

func TestIterator(t *testing.T) {
	s := openT(t, t.TempDir(), true)
	commitT(t, s, func(b *Batch) {
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			b.Set([]byte(k), []byte(k+k))
		}
	})
	// Split the data between an sstable and the memtable.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	commitT(t, s, func(b *Batch) {
		b.Set([]byte("bb"), []byte("x"))
		b.Delete([]byte("d"))
	})

	cases := []struct {
		lower, upper string
		want         []string
	}{
		{"", "", []string{"a=aa", "b=bb", "bb=x", "c=cc", "e=ee"}},
		{"b", "", []string{"b=bb", "bb=x", "c=cc", "e=ee"}},
		{"", "c", []string{"a=aa", "b=bb", "bb=x"}},
		{"b", "c", []string{"b=bb", "bb=x"}},
		{"bc", "bd", nil},
	}
	for _, c := range cases {
		if got := scan(t, s, c.lower, c.upper, false); !equal(got, c.want) {
			t.Errorf("forward [%q,%q) = %v, want %v", c.lower, c.upper, got, c.want)
		}
		rev := make([]string, len(c.want))
		for i, kv := range c.want {
			rev[len(c.want)-1-i] = kv
		}
		if got := scan(t, s, c.lower, c.upper, true); !equal(got, rev) {
			t.Errorf("backward [%q,%q) = %v, want %v", c.lower, c.upper, got, rev)
		}
	}

	lower, upper := []byte("b"), []byte("e")
	it, err := s.NewIter(lower, upper)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	lower[0], upper[0] = 'a', 'z' // bounds are copied
	if it.Valid() {
		t.Fatal("new iterator is positioned")
	}
	if !it.SeekGE([]byte("bc")) || string(it.Key()) != "c" {
		t.Fatalf("SeekGE(bc) -> %q", it.Key())
	}
	if !it.Prev() || string(it.Key()) != "bb" {
		t.Fatalf("Prev -> %q", it.Key())
	}
	if !it.SeekLT([]byte("zz")) || string(it.Key()) != "c" { // clamped to upper bound
		t.Fatalf("SeekLT(zz) -> %q", it.Key())
	}
	if it.Next() {
		t.Fatalf("Next past upper bound -> %q", it.Key())
	}
	if it.SeekGE([]byte("a")); string(it.Key()) != "b" { // clamped to lower bound
		t.Fatalf("SeekGE(a) -> %q", it.Key())
	}
	if it.SeekLT([]byte("b")) {
		t.Fatalf("SeekLT(lower) -> %q", it.Key())
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	it.SetBounds([]byte("d"), nil)
	if !it.First() || string(it.Key()) != "e" || string(it.Value()) != "ee" {
		t.Fatalf("after SetBounds First -> %q=%q", it.Key(), it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := it.Close(); err != nil { // idempotent
		t.Fatal(err)
	}

	// An iterator is a point-in-time view: later writes are invisible.
	it2, err := s.NewIter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it2.Close()
	commitT(t, s, func(b *Batch) { b.Set([]byte("0"), []byte("new")) })
	if !it2.First() || string(it2.Key()) != "a" {
		t.Fatalf("iterator saw a later write: first key %q", it2.Key())
	}
}

func TestSnapshotIsolation(t *testing.T) {
	s := openT(t, t.TempDir(), true)
	commitT(t, s, func(b *Batch) {
		b.Set([]byte("a"), []byte("1"))
		b.Set([]byte("b"), []byte("1"))
	})
	snap := s.NewSnapshot()
	defer snap.Close()

	commitT(t, s, func(b *Batch) {
		b.Set([]byte("a"), []byte("2"))
		b.Delete([]byte("b"))
		b.Set([]byte("c"), []byte("2"))
	})
	if err := s.Flush(); err != nil { // snapshot must survive a flush
		t.Fatal(err)
	}
	commitT(t, s, func(b *Batch) { b.DeleteRange([]byte("a"), []byte("z")) })

	wantValue(t, snap, "a", "1")
	wantValue(t, snap, "b", "1")
	wantMissing(t, snap, "c")
	if got, want := scan(t, snap, "", "", false), []string{"a=1", "b=1"}; !equal(got, want) {
		t.Fatalf("snapshot scan = %v, want %v", got, want)
	}
	if got := scan(t, s, "", "", false); len(got) != 0 {
		t.Fatalf("store scan = %v, want empty", got)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, _, err := snap.Get([]byte("a"), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get on closed snapshot = %v, want ErrClosed", err)
	}
}

func TestMetricsAndEstimateSize(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	val := bytes.Repeat([]byte("x"), 100)
	b := s.NewBatch()
	b.Stamp(1)
	for i := range 20000 {
		b.Set(binary.BigEndian.AppendUint64([]byte("k"), uint64(i)), val)
	}
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	m := s.Metrics()
	if m.MemTableBytes == 0 || m.WALBytes == 0 {
		t.Errorf("before flush: %+v", m)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	m = s.Metrics()
	// A compaction after the flush may leave fewer table bytes than were
	// flushed (it drops what later keys replaced): the bounds between
	// flushed and table bytes hold only while none has run.
	if m.DiskBytes == 0 || m.Tables == 0 || m.TableBytes == 0 || m.Flushes == 0 ||
		(m.Compactions == 0 && (m.FlushedBytes < m.TableBytes || m.FlushedBytes > m.WALBytes+m.TableBytes)) {
		t.Errorf("after flush: %+v", m)
	}

	if str := m.String(); str == "" {
		t.Error("empty Metrics.String")
	} else {
		t.Log(str)
	}
	if s.DebugString() == "" {
		t.Error("empty DebugString")
	}
	all, err := s.EstimateSize([]byte("k"), []byte("l"))
	if err != nil {
		t.Fatal(err)
	}
	half, err := s.EstimateSize([]byte("k"), binary.BigEndian.AppendUint64([]byte("k"), 10000))
	if err != nil {
		t.Fatal(err)
	}
	if all == 0 || half == 0 || half > all {
		t.Errorf("EstimateSize: all=%d half=%d", all, half)
	}
	none, err := s.EstimateSize([]byte("x"), []byte("y"))
	if err != nil || none != 0 {
		t.Errorf("EstimateSize of an empty range = %d, %v", none, err)
	}
}

// TestGetDoesNotAllocate checks that Get adds no allocations of its own: a
// memtable hit or miss allocates nothing, and a read that opens an sstable
// iterator costs exactly Pebble's one internal 16-byte allocation (the
// obsolete-key block-property filter slice in
// sstable.Reader.TryAddBlockPropertyFilterForHideObsoletePoints, Pebble
// v2.1.7). GetLikelyMissing (a pooled Pebble iterator) allocates nothing.
func TestGetDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("Pebble's invariant checks (enabled by -race) allocate")
	}
	s := openT(t, t.TempDir(), false)
	dst := make([]byte, 0, 256)
	check := func(key []byte, limit float64) {
		t.Helper()
		allocs := testing.AllocsPerRun(200, func() {
			if _, _, err := s.Get(key, dst); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > limit {
			t.Errorf("Get(%q) allocates %.1f times per call, want <= %v", key, allocs, limit)
		}
		allocs = testing.AllocsPerRun(200, func() {
			if _, _, err := s.GetLikelyMissing(key, dst); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 0 {
			t.Errorf("GetLikelyMissing(%q) allocates %.1f times per call", key, allocs)
		}
	}
	commitT(t, s, func(b *Batch) {
		for i := range 1000 {
			b.Set(fmt.Appendf(nil, "k%04d", i), bytes.Repeat([]byte("v"), 100))
		}
	})
	check([]byte("k0500"), 0)  // memtable hit
	check([]byte("k0500x"), 0) // memtable miss
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	check([]byte("k0500"), 1)  // sstable hit
	check([]byte("k0500x"), 1) // sstable miss (bloom filter)
}

func TestCompact(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	for round := range 4 {
		commitT(t, s, func(b *Batch) {
			for i := range 500 {
				b.Set(fmt.Appendf(nil, "\x01k%04d", i), fmt.Appendf(nil, "v%d-%d", round, i))
			}
		})
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m := s.Metrics(); m.L0Tables != 0 || m.ReadAmp != 1 {
		t.Fatalf("after Compact: %v", m)
	}
	wantValue(t, s, "\x01k0042", "v3-42")
}

// TestIterLookup checks point reads through a reused iterator against the
// data in the memtable and in sstables, deleted keys, prefixes and
// extensions of existing keys, and that the iterator keeps its view.
func TestIterLookup(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	commitT(t, s, func(b *Batch) {
		for i := range 1000 {
			b.Set(fmt.Appendf(nil, "k%d", 2*i), fmt.Appendf(nil, "v%d", 2*i))
		}
		b.Delete([]byte("k100"))
	})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	commitT(t, s, func(b *Batch) {
		b.Set([]byte("k1"), []byte("mem"))
		b.Delete([]byte("k200"))
	})
	it, err := s.NewIter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	commitT(t, s, func(b *Batch) { b.Set([]byte("k3"), []byte("later")) })
	cases := []struct {
		key, want string
		found     bool
	}{
		{"k10", "v10", true},
		{"k1998", "v1998", true},
		{"k1", "mem", true},      // memtable
		{"k0", "v0", true},       // first key
		{"k100", "", false},      // deleted in the same batch
		{"k200", "", false},      // deleted later, in the memtable
		{"k3", "", false},        // written after the iterator was made
		{"k10\x00", "", false},   // extension of an existing key
		{"k", "", false},         // prefix of existing keys
		{"a", "", false},         // before everything
		{"z", "", false},         // after everything
		{"k1998", "v1998", true}, // again, after seeking elsewhere
	}
	var dst []byte
	for _, c := range cases {
		var found bool
		dst, found, err = it.Lookup([]byte(c.key), dst)
		if err != nil || found != c.found || string(dst) != c.want {
			t.Errorf("Lookup(%q) = %q, %v, %v; want %q, %v", c.key, dst, found, err, c.want, c.found)
		}
	}
}
