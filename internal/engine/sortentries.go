package engine

import (
	"bytes"
	"cmp"
	"slices"
)

// radixFrom is the fewest entries sortEntries orders by radix: below it a
// comparison sort is as quick.
const radixFrom = 256

// sortEntries orders w.sorted by key: by head (hi, lo), then the keys of
// equal heads by their bytes past skip (the prefix they all share).
//
// The heads' first halves (hi) are ordered by a least-significant-digit
// radix sort, a byte at a time, skipping the bytes in which no two differ:
// a batch's entries in an index on a repeated field are thousands of short
// keys (ten a record), and a comparison sort costs about as much per entry
// as the rest of the writer's work on it. The sort is stable, so the
// entries of one hi stay in batch order, which for records written with
// rising keys is already their order: a run of equal hi is only checked.
// A run out of order is sorted by the rest of the key: by insertion when
// short, by radix on lo first when long (values that share their first
// eight bytes).
func (w *Writer) sortEntries(skip int) {
	past := func(x, y sortedEntry) int { return bytes.Compare(w.bytes(x.k)[skip:], w.bytes(y.k)[skip:]) }
	rest := func(x, y sortedEntry) int {
		if c := cmp.Compare(x.lo, y.lo); c != 0 {
			return c
		}
		return past(x, y)
	}
	if len(w.sorted) < radixFrom {
		slices.SortFunc(w.sorted, func(x, y sortedEntry) int {
			if c := cmp.Compare(x.hi, y.hi); c != 0 {
				return c
			}
			return rest(x, y)
		})
		return
	}
	w.radix(w.sorted, false)
	for run := range runs(w.sorted, func(x, y *sortedEntry) bool { return x.hi == y.hi }) {
		switch {
		case len(run) <= shortRun:
			w.insertionSort(run, skip)
		case slices.IsSortedFunc(run, rest):
		case len(run) >= radixFrom:
			w.radix(run, true)
			for same := range runs(run, func(x, y *sortedEntry) bool { return x.lo == y.lo }) {
				slices.SortStableFunc(same, past)
			}
		default:
			slices.SortStableFunc(run, rest)
		}
	}
}

// shortRun is the longest run of one hi that sortEntries orders by
// insertion: a batch of records of a few elements each, drawn from many
// values, leaves thousands of runs of a few entries, and a run already in
// order costs one comparison an entry.
const shortRun = 32

// insertionSort orders run by lo, then by the bytes past skip, stably.
// It compares entries in place, not by value as the slices package's
// sorts (and sortEntries' rest, written for them) do: copying a 40-byte
// entry into each comparison made a batch of shuffled keys sort in half
// again the time.
func (w *Writer) insertionSort(run []sortedEntry, skip int) {
	less := func(x, y *sortedEntry) bool {
		if x.lo != y.lo {
			return x.lo < y.lo
		}
		return bytes.Compare(w.bytes(x.k)[skip:], w.bytes(y.k)[skip:]) < 0
	}
	for i := 1; i < len(run); i++ {
		if !less(&run[i], &run[i-1]) {
			continue
		}
		e, j := run[i], i
		for ; j > 0 && less(&e, &run[j-1]); j-- {
			run[j] = run[j-1]
		}
		run[j] = e
	}
}

// runs yields the runs of more than one entry of es that same holds
// between neighbours.
func runs(es []sortedEntry, same func(x, y *sortedEntry) bool) func(yield func([]sortedEntry) bool) {
	return func(yield func([]sortedEntry) bool) {
		for i := 0; i < len(es); {
			j := i + 1
			for j < len(es) && same(&es[i], &es[j]) {
				j++
			}
			if j-i > 1 && !yield(es[i:j]) {
				return
			}
			i = j
		}
	}
}

// radix orders es by hi (or by lo), stably, a byte at a time from the
// least significant, skipping the bytes in which no entry differs from the
// first; the passes alternate between es and w.sortBuf.
func (w *Writer) radix(es []sortedEntry, lo bool) {
	n := len(es)
	key := func(e *sortedEntry) uint64 {
		if lo {
			return e.lo
		}
		return e.hi
	}
	var diff uint64
	for i := range es {
		diff |= key(&es[i]) ^ key(&es[0])
	}
	w.sortBuf = slices.Grow(w.sortBuf[:0], n)[:n]
	src, dst := es, w.sortBuf
	for shift := uint(0); shift < 64; shift += 8 {
		if (diff>>shift)&0xff == 0 {
			continue
		}
		var at [256]int
		for i := range src {
			at[byte(key(&src[i])>>shift)]++
		}
		sum := 0
		for d, c := range at {
			at[d] = sum
			sum += c
		}
		for i := range src {
			d := byte(key(&src[i]) >> shift)
			dst[at[d]] = src[i]
			at[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &es[0] {
		copy(es, src)
	}
}
