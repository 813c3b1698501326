package engine

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMultiKeysDistinct holds distinct to a sort and a compaction of the
// elements' bytes: random elements of a few bytes (zeros among them, so
// that zero-padded heads tie, and prefixes of each other), repeats
// included, on both sides of smallSort; the first of repeated elements
// stands.
func TestMultiKeysDistinct(t *testing.T) {
	rnd := rand.New(rand.NewPCG(35, 1))
	var m multiKeys
	for round := range 2000 {
		n := rnd.IntN(smallSort + 8)
		if round%10 == 0 {
			n = rnd.IntN(200)
		}
		m.elems, m.offs, m.order = m.elems[:0], append(m.offs[:0], 0), m.order[:0]
		for range n {
			for range rnd.IntN(12) {
				m.elems = append(m.elems, []byte{0, 1, 'a', 0xff}[rnd.IntN(4)])
			}
			m.offs = append(m.offs, int32(len(m.elems))) //nolint:gosec // small
		}
		elem := func(i int32) []byte { return m.elems[m.offs[i]:m.offs[i+1]] }
		want := make([]int32, n)
		for i := range want {
			want[i] = int32(i) //nolint:gosec // small
		}
		slices.SortStableFunc(want, func(a, c int32) int { return bytes.Compare(elem(a), elem(c)) })
		want = slices.CompactFunc(want, func(a, c int32) bool { return bytes.Equal(elem(a), elem(c)) })
		m.distinct()
		if len(m.order) != len(want) {
			t.Fatalf("round %d, %d elements: %d distinct, want %d", round, n, len(m.order), len(want))
		}
		for i := range want {
			if !bytes.Equal(elem(m.order[i]), elem(want[i])) || (n <= smallSort && m.order[i] != want[i]) {
				t.Fatalf("round %d, %d elements: distinct element %d is #%d %x, want #%d %x",
					round, n, i, m.order[i], elem(m.order[i]), want[i], elem(want[i]))
			}
		}
	}
}
