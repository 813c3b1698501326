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
// rising keys is already their order: a run of equal hi is only checked,
// and sorted by the rest of the key when it is out of order.
func (w *Writer) sortEntries(skip int) {
	n := len(w.sorted)
	rest := func(x, y sortedEntry) int {
		if c := cmp.Compare(x.lo, y.lo); c != 0 {
			return c
		}
		return bytes.Compare(w.bytes(x.k)[skip:], w.bytes(y.k)[skip:])
	}
	if n < radixFrom {
		slices.SortFunc(w.sorted, func(x, y sortedEntry) int {
			if c := cmp.Compare(x.hi, y.hi); c != 0 {
				return c
			}
			return rest(x, y)
		})
		return
	}
	w.radixHi()
	for i := 0; i < n; {
		j := i + 1
		for j < n && w.sorted[j].hi == w.sorted[i].hi {
			j++
		}
		if run := w.sorted[i:j]; !slices.IsSortedFunc(run, rest) {
			slices.SortStableFunc(run, rest)
		}
		i = j
	}
}

// radixHi orders w.sorted by hi, stably, a byte at a time from the least
// significant, skipping the bytes in which no entry differs from the first.
// The second half of the buffer is the scratch the passes alternate with.
func (w *Writer) radixHi() {
	n := len(w.sorted)
	buf := slices.Grow(w.sorted, n)[:2*n]
	src, dst := buf[:n], buf[n:]
	var diff uint64
	for _, e := range src[1:] {
		diff |= e.hi ^ src[0].hi
	}
	for shift := uint(0); shift < 64; shift += 8 {
		if (diff>>shift)&0xff == 0 {
			continue
		}
		var at [256]int
		for i := range src {
			at[byte(src[i].hi>>shift)]++
		}
		sum := 0
		for d, c := range at {
			at[d] = sum
			sum += c
		}
		for i := range src {
			d := byte(src[i].hi >> shift)
			dst[at[d]] = src[i]
			at[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &buf[0] {
		copy(buf[:n], src)
	}
	w.sorted = buf[:n]
}
