package pebble

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
)

// indexModel is the brute-force model of a store: its keys and values
// after each batch.
type indexModel struct {
	states []map[string]string // states[k]: after k batches
}

func newIndexModel() *indexModel { return &indexModel{states: []map[string]string{{}}} }

func (m *indexModel) last() map[string]string { return m.states[len(m.states)-1] }

// commit commits batches from to to (indexBatch's) to s and the model.
func (m *indexModel) commit(t *testing.T, s *Store, rng *rand.Rand, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		commitT(t, s, func(b *Batch) { indexBatch(rng, m, b, i) })
	}
}

// reopenEach opens the store in dir on fs read-only and then read-write,
// hands each to check and closes it.
func reopenEach(t *testing.T, fs *MemFS, dir string, check func(r *Store, readOnly bool)) {
	t.Helper()
	for _, ro := range []bool{true, false} {
		r := openMemT(t, fs, dir, Options{Sync: true, ReadOnly: ro})
		check(r, ro)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// indexBatch fills b with batch i's writes and applies them to the model:
// records and index entries (the latter in the index instance) in one
// batch, an update or a delete of an earlier key, and now and then a range
// deletion of index entries.
func indexBatch(rng *rand.Rand, m *indexModel, b *Batch, i int) {
	next := make(map[string]string, len(m.last())+8)
	for k, v := range m.last() {
		next[k] = v
	}
	set := func(k, v []byte) { b.Set(k, v); next[string(k)] = string(v) }
	for j := range 4 {
		id := fmt.Appendf(nil, "%04d/%d", i, j)
		set(keyspace.AppendRecordKey(nil, 1, id), fmt.Appendf(nil, "record %d/%d", i, j))
		// A kilobyte per entry, so that a few hundred batches fill the
		// index instance's memtable and its flushes trim the journal.
		set(append(keyspace.IndexPrefix(uint32(1+j%2)), id...), bytes.Repeat([]byte{byte(i)}, 1024))
	}
	// Entries of index 3, kept in groups (groups.go): rising primary keys
	// under a few values, and now and then one deleted.
	for j := range 3 {
		e := groupedEntry(rng.IntN(5), i*3+j)
		b.SetEntry(e)
		next[string(e)] = ""
	}
	if i > 0 && rng.IntN(2) == 0 {
		e := groupedEntry(rng.IntN(5), rng.IntN(i*3))
		b.DeleteEntry(e)
		delete(next, string(e))
	}
	if i > 0 {
		old := fmt.Appendf(nil, "%04d/%d", rng.IntN(i), rng.IntN(4))
		ix := append(keyspace.IndexPrefix(uint32(1+rng.IntN(2))), old...)
		if rng.IntN(2) == 0 {
			b.Delete(ix)
			delete(next, string(ix))
		} else {
			set(ix, []byte("updated"))
		}
	}
	if i%50 == 49 {
		lo := append(keyspace.IndexPrefix(2), fmt.Appendf(nil, "%04d", i-10)...)
		hi := append(keyspace.IndexPrefix(2), fmt.Appendf(nil, "%04d", i-5)...)
		b.DeleteRange(lo, hi)
		for k := range next {
			if k >= string(lo) && k < string(hi) {
				delete(next, k)
			}
		}
	}
	m.states = append(m.states, next)
}

// groupedEntry is the key of the entry of value v and primary key pk in
// index 3, as the engine makes it.
func groupedEntry(v, pk int) []byte {
	k := orderedcode.AppendString(keyspace.IndexPrefix(3), fmt.Sprintf("value%d", v))
	return orderedcode.AppendInt(k, int64(pk))
}

// contents reads every key the store shows, through one iterator.
func contents(t *testing.T, r Reader) map[string]string {
	t.Helper()
	it, err := r.NewIter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	got := map[string]string{}
	var prev []byte
	for ok := it.First(); ok; ok = it.Next() {
		if prev != nil && bytes.Compare(prev, it.Key()) >= 0 {
			t.Fatalf("iterator went from % x to % x", prev, it.Key())
		}
		prev = append(prev[:0], it.Key()...)
		got[string(it.Key())] = string(it.Value())
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return got
}

// matchState returns the k in [lo, hi] whose model state equals got, or
// -1.
func matchState(m *indexModel, got map[string]string, lo, hi int) int {
	for k := lo; k <= hi && k < len(m.states); k++ {
		if mapsEqual(m.states[k], got) {
			return k
		}
	}
	return -1
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestIndexInstancePowerCut writes batches that touch both instances,
// cutting the power at seeded moments (some cuts keep part of the unsynced
// bytes): the store that reopens, read-only and then read-write, holds
// exactly the state after some batch at or after the last acknowledged
// one, records and index entries alike, so the index instance is never
// ahead of or behind the records, whatever it had flushed.
// With async, every index batch is applied on a goroutine of its own
// (applyIndex), and the cut may come while one is.
func TestIndexInstancePowerCut(t *testing.T) {
	for _, keep := range []int{0, 50} {
		for seed := range uint64(4) {
			async := seed%2 == 1
			t.Run(fmt.Sprintf("keep%d/seed%d/async=%v", keep, seed, async), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				fs := NewMemFS()
				const dir = "/disk/protobase/data"
				s := openMemT(t, fs, dir, Options{Sync: true, AsyncIndexBytes: asyncBytes(async)})
				if s.index == nil {
					t.Fatal("a new store has no index instance")
				}
				m := newIndexModel()
				acked := 0
				n := 200 + rng.IntN(800)
				var pending []*Batch
				for i := range n {
					b := s.NewBatch()
					b.Stamp(1)
					indexBatch(rng, m, b, i)
					if err := s.Apply(b); err != nil {
						t.Fatal(err)
					}
					if rng.IntN(3) > 0 {
						if err := b.Wait(); err != nil {
							t.Fatal(err)
						}
						acked = i + 1
						b.Close()
					} else {
						pending = append(pending, b)
					}
					if rng.IntN(200) == 0 {
						if err := s.Flush(); err != nil {
							t.Fatal(err)
						}
					}
				}
				var cut *MemFS
				if keep == 0 {
					cut = fs.PowerCut(nil, 0)
				} else {
					cut = fs.PowerCut(rng, keep)
				}
				for _, b := range pending {
					b.Close()
				}
				reopenEach(t, cut, dir, func(r *Store, ro bool) {
					got := contents(t, r)
					if k := matchState(m, got, acked, n); k < 0 {
						t.Fatalf("read-only %v: after the cut the store holds %d keys, the state after no batch from %d to %d", ro, len(got), acked, n)
					}
					sn := r.NewSnapshot()
					if !mapsEqual(contents(t, sn), got) {
						t.Fatalf("read-only %v: a snapshot reads otherwise than the store", ro)
					}
					if err := sn.Close(); err != nil {
						t.Fatal(err)
					}
				})
			})
		}
	}
}

// TestIndexInstanceJournalTrimmed shows the journal does not outlive the
// index instance's flushes: after a clean Close nothing is left to apply,
// and while writing it stays within what one flush of the index instance
// holds.
func TestIndexInstanceJournalTrimmed(t *testing.T) {
	fs := NewMemFS()
	const dir = "/d"
	s := openMemT(t, fs, dir, Options{Sync: true})
	m := newIndexModel()
	rng := rand.New(rand.NewPCG(1, 2))
	// 3,000 batches of 4 KiB of index writes: 12 MiB, six times the index
	// instance's flush threshold (2 MiB with these options); 1,500 in the
	// short run, which the race detector slows most.
	batches := 3000
	if testing.Short() {
		batches = 1500
	}
	m.commit(t, s, rng, 0, batches)
	if n := journalLen(t, s); n > 1000 {
		t.Errorf("journal holds %d batches of %d while writing", n, batches)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMemT(t, fs, dir, Options{Sync: true})
	if n := journalLen(t, s); n != 0 {
		t.Errorf("journal holds %d batches after a clean Close", n)
	}
	if !mapsEqual(contents(t, s), m.last()) {
		t.Error("reopened store differs from the model")
	}
}

var iterSeed = flag.Uint64("iter.seed", 0, "first seed of TestIndexInstanceIterator (0: from the clock)")

// TestIndexInstanceIterator checks an iterator over both instances against
// a sorted list of the keys, through random seeks, steps in both
// directions and bound changes, on the store and on a snapshot, for 20
// seeds from -iter.seed on. The keys span the meta, record and index tags
// and keys above them, and the journal never shows.
func TestIndexInstanceIterator(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	var keys []string
	commitT(t, s, func(b *Batch) {
		for i := range 40 {
			for _, k := range [][]byte{
				fmt.Appendf([]byte{keyspace.TagMeta}, "m%02d", i),
				keyspace.AppendRecordKey(nil, uint32(i%3), fmt.Appendf(nil, "r%02d", i)),
				append(keyspace.IndexPrefix(uint32(i%3)), fmt.Appendf(nil, "x%02d", i)...),
				fmt.Appendf(nil, "z%02d", i),
			} {
				b.Set(k, k)
				keys = append(keys, string(k))
			}
		}
	})
	slices.Sort(keys)
	if s.index == nil || journalLen(t, s) == 0 {
		t.Fatal("want an index instance and a journal entry")
	}
	first := *iterSeed
	if first == 0 {
		first = uint64(time.Now().UnixNano())
	}
	for seed := first; seed < first+20; seed++ {
		checkIterator(t, s, keys, seed)
	}
}

// checkIterator makes 3,000 random moves of an iterator over s, and of one
// over a snapshot of it, checking each against the sorted keys.
func checkIterator(t *testing.T, s *Store, keys []string, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 4))
	probe := func() []byte {
		k := []byte(keys[rng.IntN(len(keys))])
		switch rng.IntN(3) {
		case 0:
			return k
		case 1:
			return append(k, 0)
		}
		return k[:rng.IntN(len(k)+1)]
	}
	sn := s.NewSnapshot()
	defer sn.Close()
	for _, r := range []Reader{s, sn} {
		it, err := r.NewIter(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := &iterModel{keys: keys, lo: "", hi: "\xff\xff", pos: -1}
		for step := range 3000 {
			op, check := m.step(rng, it, probe)
			if !check {
				continue
			}
			want := m.inBounds(m.pos)
			if it.Valid() != want {
				t.Fatalf("seed %d, %T, step %d %s within [%q, %q): Valid() = %v, want %v", seed, r, step, op, m.lo, m.hi, it.Valid(), want)
			}
			if want && string(it.Key()) != keys[m.pos] {
				t.Fatalf("seed %d, %T, step %d %s: key % x, want % x", seed, r, step, op, it.Key(), keys[m.pos])
			}
			if !want {
				m.pos = -1
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIterEmptyUpperBound: an empty upper bound, as against none (nil),
// leaves nothing in range, given to NewIter or to SetBounds, on the store
// and on a snapshot (whose iterator opens its sides on first use).
func TestIterEmptyUpperBound(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	commitT(t, s, func(b *Batch) {
		b.Set(keyspace.AppendRecordKey(nil, 1, []byte("r")), []byte("v"))
		b.Set(append(keyspace.IndexPrefix(1), 'x'), nil)
	})
	sn := s.NewSnapshot()
	defer sn.Close()
	for _, r := range []Reader{s, sn} {
		for _, lower := range [][]byte{nil, {}, []byte("a")} {
			it, err := r.NewIter(lower, []byte{})
			if err != nil {
				t.Fatal(err)
			}
			if it.First() || it.Last() {
				t.Errorf("%T: NewIter(%q, empty) holds % x", r, lower, it.Key())
			}
			it.SetBounds(nil, nil)
			if !it.First() {
				t.Errorf("%T: no bounds: no key", r)
			}
			it.SetBounds(lower, []byte{})
			if it.First() || it.Last() {
				t.Errorf("%T: SetBounds(%q, empty) holds % x", r, lower, it.Key())
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// iterModel is where an iterator over keys must stand: pos indexes keys,
// -1 when unpositioned or past either end.
type iterModel struct {
	keys   []string
	lo, hi string
	pos    int
}

func (m *iterModel) inBounds(i int) bool {
	return i >= 0 && i < len(m.keys) && m.keys[i] >= m.lo && m.keys[i] < m.hi
}

// step makes one random move on it and on the model; check is false when
// there is nothing to compare (a step skipped, or bounds changed).
func (m *iterModel) step(rng *rand.Rand, it *Iter, probe func() []byte) (op string, check bool) {
	switch rng.IntN(8) {
	case 0:
		m.pos = sort0(m.keys, m.lo)
		it.First()
		return "First", true
	case 1:
		m.pos = sort0(m.keys, m.hi) - 1
		it.Last()
		return "Last", true
	case 2:
		k := probe()
		m.pos = sort0(m.keys, max(string(k), m.lo))
		it.SeekGE(k)
		return fmt.Sprintf("SeekGE(% x)", k), true
	case 3:
		k := probe()
		m.pos = sort0(m.keys, min(string(k), m.hi)) - 1
		it.SeekLT(k)
		return fmt.Sprintf("SeekLT(% x)", k), true
	case 4, 5:
		if !m.inBounds(m.pos) {
			return "", false
		}
		m.pos++
		it.Next()
		return "Next", true
	case 6:
		if !m.inBounds(m.pos) {
			return "", false
		}
		m.pos--
		it.Prev()
		return "Prev", true
	}
	a, b := string(probe()), string(probe())
	if a > b {
		a, b = b, a
	}
	m.lo, m.hi, m.pos = a, b, -1
	it.SetBounds([]byte(a), []byte(b))
	return "", false
}

// sort0 is the index of the first key at or above k.
func sort0(keys []string, k string) int {
	i, _ := slices.BinarySearch(keys, k)
	return i
}

func journalLen(t *testing.T, s *Store) (n int) {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.SeekGE(s.layout.journal); ok && bytes.HasPrefix(it.Key(), s.layout.journal); ok = it.Next() {
		n++
	}
	return n
}

// TestSingleInstanceStore opens a store made before the index instance
// (index entries in the one Pebble instance): it stays that way, reads
// and writes as before, and copies itself.
func TestSingleInstanceStore(t *testing.T) {
	fs := NewMemFS()
	const dir = "/old"
	s := openMemT(t, fs, dir, Options{Sync: true, singleInstance: true})
	m := newIndexModel()
	rng := rand.New(rand.NewPCG(5, 6))
	m.commit(t, s, rng, 0, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMemT(t, fs, dir, Options{Sync: true})
	if s.index != nil {
		t.Fatal("a store with data and no index directory got an index instance")
	}
	if _, err := fs.fs.Stat(fs.fs.PathJoin(dir, indexDirName)); err == nil {
		t.Fatal("opening a single-instance store created an index directory")
	}
	m.commit(t, s, rng, 100, 150)
	if !mapsEqual(contents(t, s), m.last()) {
		t.Fatal("single-instance store differs from the model")
	}
	if err := s.Checkpoint(dir + "-copy"); err != nil {
		t.Fatal(err)
	}
	c := openMemT(t, fs, dir+"-copy", Options{Sync: true})
	if c.index != nil || !mapsEqual(contents(t, c), m.last()) {
		t.Fatal("the copy of a single-instance store differs")
	}
}

// TestIndexInstanceGroupsKept opens index instances of both layouts: one
// made before entry groups (Pebble's default merger) keeps every entry a
// key of its own across reopens, one made with groups keeps them, and
// both read and write alike; the store in testdata, from before groups,
// opens ungrouped.
func TestIndexInstanceGroupsKept(t *testing.T) {
	for _, ungrouped := range []bool{true, false} {
		t.Run(fmt.Sprintf("ungrouped=%v", ungrouped), func(t *testing.T) {
			fs := NewMemFS()
			const dir = "/d"
			s := openMemT(t, fs, dir, Options{Sync: true, ungrouped: ungrouped})
			m := newIndexModel()
			rng := rand.New(rand.NewPCG(9, 10))
			m.commit(t, s, rng, 0, 100)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			reopenEach(t, fs, dir, func(r *Store, ro bool) {
				if r.GroupsEntries() == ungrouped {
					t.Fatalf("read-only %v: reopened with groups %v, written with %v", ro, r.GroupsEntries(), !ungrouped)
				}
				if !mapsEqual(contents(t, r), m.last()) {
					t.Fatalf("read-only %v: reopened store differs from the model", ro)
				}
				if !ro {
					m.commit(t, r, rng, 100, 150)
					if !mapsEqual(contents(t, r), m.last()) {
						t.Fatal("store differs from the model after more batches")
					}
				}
			})
		})
	}
	s := openT(t, legacyStore(t), true)
	if s.GroupsEntries() {
		t.Error("a store from before entry groups opened grouped")
	}
}

// TestIndexInstanceCheckpoint copies a store whose index instance holds
// unflushed batches and whose journal holds entries: the copy opens
// (read-only and read-write) with everything applied before the copy.
func TestIndexInstanceCheckpoint(t *testing.T) {
	fs := NewMemFS()
	const dir = "/d"
	s := openMemT(t, fs, dir, Options{Sync: true})
	m := newIndexModel()
	rng := rand.New(rand.NewPCG(7, 8))
	m.commit(t, s, rng, 0, 700)
	if err := s.Checkpoint("/copy"); err != nil {
		t.Fatal(err)
	}
	m.commit(t, s, rng, 700, 720)
	reopenEach(t, fs, "/copy", func(c *Store, ro bool) {
		if c.index == nil {
			t.Fatal("the copy has no index instance")
		}
		if !mapsEqual(contents(t, c), m.states[700]) {
			t.Fatalf("read-only %v: the copy differs from the state it was taken at", ro)
		}
	})
}

// TestIndexInstanceMissingIndexDir refuses a store whose index directory
// went missing, rather than reading it without its index entries.
func TestIndexInstanceMissingIndexDir(t *testing.T) {
	fs := NewMemFS()
	const dir = "/d"
	s := openMemT(t, fs, dir, Options{Sync: true})
	commitT(t, s, func(b *Batch) { b.Set(append(keyspace.IndexPrefix(1), 'x'), nil) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.fs.RemoveAll(fs.fs.PathJoin(dir, indexDirName)); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		s, err := Open(Options{FS: fs, Dir: dir, Layout: testLayout, Sync: true, ReadOnly: ro})
		if err == nil {
			_ = s.Close()
			t.Fatalf("read-only %v: Open of a store without its index directory succeeded", ro)
		}
		if !strings.Contains(err.Error(), "missing") {
			t.Errorf("read-only %v: Open: %v, want it to say the index directory is missing", ro, err)
		}
	}
}

// TestIndexInstanceAsyncApply applies batches whose index writes are held
// back and go to the index instance together on a goroutine of their own
// (applyIndex, indexhold.go), every batch (AsyncIndexBytes 1) and those
// over asyncIndexBytes, while readers open
// views: every view that holds a batch's record holds its entries and no
// entry without its record; a point read of an entry right after Apply
// finds it; a Flush right after Apply flushes it; and a Close right after
// an Apply keeps the batch for the next Open.
func TestIndexInstanceAsyncApply(t *testing.T) {
	for _, all := range []bool{true, false} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			fs := NewMemFS()
			const dir = "/disk/protobase/data"
			s := openMemT(t, fs, dir, Options{Sync: true, AsyncIndexBytes: asyncBytes(all)})
			// 20 entries of 1 KiB: over asyncIndexBytes.
			const entries = 20
			value := bytes.Repeat([]byte{'v'}, 1<<10)
			entry := func(i, j int) []byte {
				return append(keyspace.IndexPrefix(1), fmt.Appendf(nil, "%05d/%02d", i, j)...)
			}
			fill := func(b *Batch, i int) {
				b.Stamp(1)
				b.Set(keyspace.AppendRecordKey(nil, 1, fmt.Appendf(nil, "%05d", i)), []byte("record"))
				for j := range entries {
					b.Set(entry(i, j), value)
				}
			}
			stop := make(chan struct{})
			errs := make(chan error, 2)
			for r := range 2 {
				go func() { errs <- readViews(s, r == 1, entries, stop) }()
			}
			const batches = 300
			for i := range batches {
				b := s.NewBatch()
				fill(b, i)
				if err := s.Apply(b); err != nil {
					t.Fatal(err)
				}
				if i%100 == 50 {
					if err := s.Flush(); err != nil {
						t.Fatal(err)
					}
					if last := flushedLast(t, s); !bytes.Equal(last, entry(i, entries-1)) {
						t.Fatalf("batch %d: right after Apply, Flush left the index instance's tables ending at %q", i, last)
					}
				}
				if _, found, err := s.Get(entry(i, entries-1), nil); err != nil || !found {
					t.Fatalf("batch %d: its last entry, read right after Apply: found %v, %v", i, found, err)
				}
				// The next batch's probes: of the record (the main
				// instance alone, without waiting) and of the entries.
				next := s.NewBatch()
				rec := keyspace.AppendRecordKey(nil, 1, fmt.Appendf(nil, "%05d", i))
				for _, r := range [][2][]byte{{rec, append(rec, 0)}, {entry(i, 0), append(entry(i, entries-1), 0)}} {
					if absent, err := next.ReadAbsent(r[0], r[1]); err != nil || absent {
						t.Fatalf("batch %d: ReadAbsent(%q, %q) right after Apply: %v, %v", i, r[0], r[1], absent, err)
					}
				}
				next.Close()
				if err := b.Wait(); err != nil {
					t.Fatal(err)
				}
				b.Close()
			}
			close(stop)
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			b := s.NewBatch()
			fill(b, batches)
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			b.Close()
			reopenEach(t, fs, dir, func(r *Store, ro bool) {
				got := contents(t, r)
				if want := (batches + 1) * (entries + 1); len(got) != want {
					t.Fatalf("read-only %v: reopened with %d keys, want %d", ro, len(got), want)
				}
			})
		})
	}
}

// readViews opens views of s (snapshots with snap) until stop is closed
// and checks each holds, for every record of the test's batches, its
// entries, and no other entries.
func readViews(s *Store, snap bool, entries int, stop chan struct{}) error {
	for views := 0; ; views++ {
		select {
		case <-stop:
			if views == 0 {
				return errors.New("no view was opened")
			}
			return nil
		default:
		}
		var r Reader = s
		var sn *Snapshot
		if snap {
			sn = s.NewSnapshot()
			r = sn
		}
		recs, ents, err := countView(r)
		if sn != nil {
			err = errors.Join(err, sn.Close())
		}
		if err != nil {
			return err
		}
		if ents != recs*entries {
			return fmt.Errorf("a view holds %d records and %d entries, want %d", recs, ents, recs*entries)
		}
	}
}

// countView counts the records and the entries of index 1 r holds.
func countView(r Reader) (recs, ents int, err error) {
	it, err := r.NewIter(nil, nil)
	if err != nil {
		return 0, 0, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.HasPrefix(it.Key(), keyspace.IndexPrefix(1)) {
			ents++
		} else {
			recs++
		}
	}
	return recs, ents, errors.Join(it.Error(), it.Close())
}

// flushedLast returns the largest key in the index instance's tables.
func flushedLast(t *testing.T, s *Store) []byte {
	t.Helper()
	levels, err := s.index.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var last []byte
	for _, l := range levels {
		for _, tb := range l {
			if k := tb.Largest.UserKey; bytes.Compare(k, last) > 0 {
				last = k
			}
		}
	}
	return last
}

// asyncBytes is Options.AsyncIndexBytes for every index batch held back
// (all), or the default.
func asyncBytes(all bool) int {
	if all {
		return 1
	}
	return 0
}

// An apply to the index instance that fails: the batch stands (its main
// batch is applied, so Apply and Wait report no error, which would say
// nothing was), and its index writes are kept and applied before any
// later batch's; while they still fail, later batches are refused whole;
// once they apply, writes go on, a flush trims nothing they need, and the
// store reopens with every batch whose main batch was applied, entries
// included. Both ways: batches applied at once, and held and applied on a
// goroutine.
func TestIndexInstanceApplyFails(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(fmt.Sprintf("held=%v", held), func(t *testing.T) {
			fs := NewMemFS()
			const dir = "/disk/protobase/data"
			s := openMemT(t, fs, dir, Options{Sync: true, AsyncIndexBytes: asyncBytes(held), IndexHoldBytes: 1})
			const entries = 5
			rec := func(i int) []byte { return keyspace.AppendRecordKey(nil, 1, fmt.Appendf(nil, "%05d", i)) }
			entry := func(i, j int) []byte {
				return append(keyspace.IndexPrefix(1), fmt.Appendf(nil, "%05d/%02d", i, j)...)
			}
			write := func(i int) (applyErr, waitErr error) {
				b := s.NewBatch()
				defer b.Close()
				b.Stamp(1)
				b.Set(rec(i), []byte("record"))
				for j := range entries {
					b.Set(entry(i, j), []byte("e"))
				}
				if err := s.Apply(b); err != nil {
					return err, nil
				}
				return nil, b.Wait()
			}
			fault := func(err error) {
				s.index.applyMu.Lock()
				s.index.failApply = err
				s.index.applyMu.Unlock()
			}
			if a, w := write(0); a != nil || w != nil {
				t.Fatalf("batch 0: %v, %v", a, w)
			}
			fault(errors.New("injected"))
			if a, w := write(1); a != nil || w != nil {
				t.Fatalf("batch 1, its main batch applied and its index writes failing: %v, %v", a, w)
			}
			if _, found, err := s.Get(rec(1), nil); err != nil || !found {
				t.Fatalf("batch 1's record: found %v, %v", found, err)
			}
			a, _ := write(2)
			if a == nil {
				t.Fatal("batch 2, after batch 1's index writes failed and still fail: applied")
			}
			if _, found, err := s.Get(rec(2), nil); err != nil || found {
				t.Fatalf("batch 2, refused (%v): its record found %v, %v", a, found, err)
			}
			fault(nil)
			if a, w := write(3); a != nil || w != nil {
				t.Fatalf("batch 3, the fault gone: %v, %v", a, w)
			}
			for _, i := range []int{0, 1, 3} {
				if _, found, err := s.Get(entry(i, entries-1), nil); err != nil || !found {
					t.Fatalf("batch %d's last entry: found %v, %v", i, found, err)
				}
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			reopenEach(t, fs, dir, func(r *Store, ro bool) {
				got := contents(t, r)
				if want := 3 * (entries + 1); len(got) != want {
					t.Fatalf("read-only %v: reopened with %d keys, want %d (batches 0, 1 and 3)", ro, len(got), want)
				}
				if _, ok := got[string(rec(2))]; ok {
					t.Fatalf("read-only %v: the refused batch 2's record is there", ro)
				}
			})
		})
	}
}
