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
// The heads are ordered by a least-significant-digit radix sort, a byte at
// a time, skipping the bytes in which no two heads differ: a batch's
// entries in an index on a repeated field are thousands of short keys
// (ten a record), whose heads differ in a few bytes, and a comparison
// sort costs about as much per entry as the rest of the writer's work on
// it. The sort is stable, so entries of equal heads stay in batch order
// until the comparison sort of their run.
func (w *Writer) sortEntries(skip int) {
	n := len(w.sorted)
	if n < radixFrom {
		slices.SortFunc(w.sorted, func(x, y sortedEntry) int {
			if c := cmp.Compare(x.hi, y.hi); c != 0 {
				return c
			}
			if c := cmp.Compare(x.lo, y.lo); c != 0 {
				return c
			}
			return bytes.Compare(w.bytes(x.k)[skip:], w.bytes(y.k)[skip:])
		})
		return
	}
	// The second half of the buffer is the scratch the passes alternate
	// with.
	buf := slices.Grow(w.sorted, n)[:2*n]
	src, dst := buf[:n], buf[n:]
	var dhi, dlo uint64 // the bits in which some head differs from the first
	for _, e := range src[1:] {
		dhi |= e.hi ^ src[0].hi
		dlo |= e.lo ^ src[0].lo
	}
	for pass := range 16 {
		shift := uint(8 * (pass % 8))
		hi := pass >= 8
		mask := dlo
		if hi {
			mask = dhi
		}
		if (mask>>shift)&0xff == 0 {
			continue
		}
		var at [256]int
		for i := range src {
			at[src[i].digit(hi, shift)]++
		}
		sum := 0
		for d, c := range at {
			at[d] = sum
			sum += c
		}
		for i := range src {
			d := src[i].digit(hi, shift)
			dst[at[d]] = src[i]
			at[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &buf[0] {
		copy(buf[:n], src)
	}
	w.sorted = buf[:n]
	for i := 0; i < n; {
		j := i + 1
		for j < n && w.sorted[j].hi == w.sorted[i].hi && w.sorted[j].lo == w.sorted[i].lo {
			j++
		}
		if j-i > 1 {
			slices.SortStableFunc(w.sorted[i:j], func(x, y sortedEntry) int {
				return bytes.Compare(w.bytes(x.k)[skip:], w.bytes(y.k)[skip:])
			})
		}
		i = j
	}
}

// digit is the byte of e's head at shift in hi (or lo).
func (e *sortedEntry) digit(hi bool, shift uint) byte {
	if hi {
		return byte(e.hi >> shift)
	}
	return byte(e.lo >> shift)
}
