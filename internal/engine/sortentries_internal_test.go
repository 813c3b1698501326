package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestSortEntries orders random entry keys — a shared prefix, then tags
// of varied lengths and bytes (zeros among them, so that zero-padded heads
// tie), then primary keys, repeats included — as bytes.Compare does, on
// both sides of the size where the radix sort takes over.
func TestSortEntries(t *testing.T) {
	rnd := rand.New(rand.NewPCG(34, 1))
	for _, n := range []int{0, 1, 2, 100, radixFrom - 1, radixFrom, 1000, 20_000} {
		w := &Writer{}
		prefix := []byte{2, 0, 0, 0, 7}
		for range n {
			s0 := len(w.arena)
			w.arena = append(w.arena, prefix...)
			for range rnd.IntN(24) {
				w.arena = append(w.arena, []byte{0, 1, 'a', 'b', 0xff}[rnd.IntN(5)])
			}
			w.arena = append(w.arena, byte(rnd.IntN(3)))
			addSortedEntry(w, s0, len(prefix))
		}
		checkSortEntries(t, w, len(prefix), fmt.Sprintf("%d entries", n))
	}
}

// addSortedEntry adds the key from arena offset s0 to the arena's end to
// w.sorted, its head taken past skip, as putSorted does.
func addSortedEntry(w *Writer, s0, skip int) {
	k := span{int32(s0), int32(len(w.arena))} //nolint:gosec // small
	hi, lo := keyHead(w.bytes(k)[skip:])
	w.sorted = append(w.sorted, sortedEntry{hi: hi, lo: lo, k: k})
}

// checkSortEntries sorts w.sorted and holds the result to the keys sorted
// by bytes.Compare.
func checkSortEntries(t *testing.T, w *Writer, skip int, what string) {
	t.Helper()
	n := len(w.sorted)
	want := make([][]byte, n)
	for i, e := range w.sorted {
		want[i] = w.bytes(e.k)
	}
	slices.SortFunc(want, bytes.Compare)
	w.sortEntries(skip)
	if len(w.sorted) != n {
		t.Fatalf("%s: %d after the sort", what, len(w.sorted))
	}
	for i, e := range w.sorted {
		if !bytes.Equal(w.bytes(e.k), want[i]) {
			t.Fatalf("%s: entry %d is %x, want %x", what, i, w.bytes(e.k), want[i])
		}
	}
}

// TestSortEntriesRuns orders entries as a batch of records makes them: a
// few values (so that many entries share a head's first half; all of them
// when the values share their first eight bytes) followed by primary keys
// rising, falling or shuffled in batch order, the runs of one value then
// already in order, reversed or mixed.
func TestSortEntriesRuns(t *testing.T) {
	rnd := rand.New(rand.NewPCG(34, 2))
	for _, shared := range []string{"", "category/"} {
		for _, order := range []string{"rising", "falling", "shuffled"} {
			for _, values := range []int{1, 3, 50} {
				w := &Writer{}
				prefix := []byte{2, 0, 0, 0, 7}
				const n = 3000
				pks := make([]uint64, n)
				for i := range pks {
					pks[i] = uint64(1<<40 + i*7) //nolint:gosec // small
				}
				switch order {
				case "falling":
					slices.Reverse(pks)
				case "shuffled":
					rnd.Shuffle(n, func(i, j int) { pks[i], pks[j] = pks[j], pks[i] })
				}
				for _, pk := range pks {
					s0 := len(w.arena)
					w.arena = append(w.arena, prefix...)
					w.arena = append(w.arena, shared...)
					w.arena = append(w.arena, "tag"[:1+rnd.IntN(3)]...)
					w.arena = append(w.arena, byte(rnd.IntN(values)), 0, 1)
					w.arena = binary.BigEndian.AppendUint64(w.arena, pk)
					addSortedEntry(w, s0, len(prefix))
				}
				checkSortEntries(t, w, len(prefix), fmt.Sprintf("%q and %s keys, %d values", shared, order, values))
			}
		}
	}
}

// BenchmarkSortEntries orders a batch's 10,000 entries (1,000 records of
// ten tags from 1,000 values) with primary keys rising in batch order or
// shuffled, and with values that share their first eight bytes.
func BenchmarkSortEntries(b *testing.B) {
	for _, c := range []struct {
		name, shared string
		shuffled     bool
	}{{"rising", "", false}, {"shuffled", "", true}, {"shared-rising", "category/", false}, {"shared-shuffled", "category/", true}} {
		b.Run(c.name, func(b *testing.B) {
			rnd := rand.New(rand.NewPCG(34, 3))
			w := &Writer{}
			prefix := []byte{2, 0, 0, 0, 7}
			pks := make([]uint64, 1000)
			for i := range pks {
				pks[i] = uint64(1<<40 + i) //nolint:gosec // small
			}
			if c.shuffled {
				rnd.Shuffle(len(pks), func(i, j int) { pks[i], pks[j] = pks[j], pks[i] })
			}
			for _, pk := range pks {
				for range 10 {
					s0 := len(w.arena)
					w.arena = append(w.arena, prefix...)
					w.arena = append(w.arena, c.shared+"tag"+strconv.Itoa(rnd.IntN(1000))...)
					w.arena = append(w.arena, 0, 1)
					w.arena = binary.BigEndian.AppendUint64(w.arena, pk)
					addSortedEntry(w, s0, len(prefix))
				}
			}
			in := slices.Clone(w.sorted)
			b.ResetTimer()
			for range b.N {
				w.sorted = append(w.sorted[:0], in...)
				w.sortEntries(len(prefix))
			}
		})
	}
}

// BenchmarkBucket groups a batch's 10,000 entries (1,000 records of ten
// tags from 1,000 values, primary keys rising): the writer's step that
// finds each entry's group.
func BenchmarkBucket(b *testing.B) {
	rnd := rand.New(rand.NewPCG(34, 3))
	w := &Writer{phase1: phase1{seed: maphash.MakeSeed()}}
	prefix := []byte{2, 0, 0, 0, 7}
	for i := range 1000 {
		for range 10 {
			s0 := len(w.arena)
			w.arena = append(w.arena, prefix...)
			w.arena = append(w.arena, "tag"+strconv.Itoa(rnd.IntN(1000))...)
			w.arena = append(w.arena, 0, 1)
			w.arena = binary.BigEndian.AppendUint64(w.arena, uint64(1<<40+i))           //nolint:gosec // small
			w.groups.keys = append(w.groups.keys, span{int32(s0), int32(len(w.arena))}) //nolint:gosec // small
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		w.groups.bucket(w, len(prefix))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(w.groups.keys)), "ns/entry")
}
