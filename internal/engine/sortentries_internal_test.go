package engine

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
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
			s0 := int32(len(w.arena)) //nolint:gosec // small
			w.arena = append(w.arena, prefix...)
			for range rnd.IntN(24) {
				w.arena = append(w.arena, []byte{0, 1, 'a', 'b', 0xff}[rnd.IntN(5)])
			}
			w.arena = append(w.arena, byte(rnd.IntN(3)))
			k := span{s0, int32(len(w.arena))} //nolint:gosec // small
			hi, lo := keyHead(w.bytes(k)[len(prefix):])
			w.sorted = append(w.sorted, sortedEntry{hi: hi, lo: lo, k: k})
		}
		want := make([][]byte, n)
		for i, e := range w.sorted {
			want[i] = w.bytes(e.k)
		}
		slices.SortFunc(want, bytes.Compare)
		w.sortEntries(len(prefix))
		if len(w.sorted) != n {
			t.Fatalf("%d entries: %d after the sort", n, len(w.sorted))
		}
		for i, e := range w.sorted {
			if !bytes.Equal(w.bytes(e.k), want[i]) {
				t.Fatalf("%d entries: entry %d is %x, want %x", n, i, w.bytes(e.k), want[i])
			}
		}
	}
}

// TestSortEntriesRuns orders entries as a batch of records makes them: a
// few values (so that many entries share a head's first half) followed by
// primary keys rising, falling or shuffled in batch order, the runs of one
// value then already in order, reversed or mixed.
func TestSortEntriesRuns(t *testing.T) {
	rnd := rand.New(rand.NewPCG(34, 2))
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
				s0 := int32(len(w.arena)) //nolint:gosec // small
				w.arena = append(w.arena, prefix...)
				w.arena = append(w.arena, "tag"[:1+rnd.IntN(3)]...)
				w.arena = append(w.arena, byte(rnd.IntN(values)), 0, 1)
				w.arena = binary.BigEndian.AppendUint64(w.arena, pk)
				k := span{s0, int32(len(w.arena))} //nolint:gosec // small
				hi, lo := keyHead(w.bytes(k)[len(prefix):])
				w.sorted = append(w.sorted, sortedEntry{hi: hi, lo: lo, k: k})
			}
			want := make([][]byte, n)
			for i, e := range w.sorted {
				want[i] = w.bytes(e.k)
			}
			slices.SortFunc(want, bytes.Compare)
			w.sortEntries(len(prefix))
			for i, e := range w.sorted {
				if !bytes.Equal(w.bytes(e.k), want[i]) {
					t.Fatalf("%s keys, %d values: entry %d is %x, want %x", order, values, i, w.bytes(e.k), want[i])
				}
			}
		}
	}
}
