package query

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/protobase/protobase/internal/orderedcode"
)

// member is the reference membership of a component encoding in a list of
// ranges (any order, possibly overlapping).
func member(rs rset, p []byte) bool {
	for _, r := range rs {
		if bytes.Compare(p, r.lo) >= 0 && (r.hi == nil || bytes.Compare(p, r.hi) < 0) {
			return true
		}
	}
	return false
}

func isNormal(rs rset) bool {
	for i, r := range rs {
		if r.empty() || (i > 0 && (rs[i-1].hi == nil || bytes.Compare(rs[i-1].hi, r.lo) > 0)) {
			return false
		}
	}
	return true
}

// TestRangeAlgebra checks normalize, intersect, union, hull and the point
// operations against membership of every value of a small universe.
func TestRangeAlgebra(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var universe [][]byte
	for v := int64(-6); v <= 6; v++ {
		universe = append(universe, orderedcode.AppendInt(nil, v))
	}
	bound := func() []byte {
		v := int64(r.IntN(15) - 7)
		e := orderedcode.AppendInt(nil, v)
		if r.IntN(2) == 0 {
			return orderedcode.PrefixEnd(e)
		}
		return e
	}
	randomSet := func() rset {
		var rs rset
		for range r.IntN(4) {
			x := rng{lo: bound(), hi: bound()}
			if r.IntN(5) == 0 {
				x.lo = nil
			}
			if r.IntN(5) == 0 {
				x.hi = nil
			}
			rs = append(rs, x)
		}
		return rs
	}
	randomPoints := func() [][]byte {
		var ps [][]byte
		for range r.IntN(5) {
			ps = append(ps, pick(r, universe))
		}
		return sortedPoints(ps)
	}
	for i := range 3000 {
		a, b := randomSet(), randomSet()
		na, nb := normalize(a), normalize(b)
		if !isNormal(na) || !isNormal(nb) {
			t.Fatalf("case %d: normalize(%x) = %x", i, a, na)
		}
		in, un := intersect(na, nb), normalize(append(append(rset{}, na...), nb...))
		if !isNormal(in) || !isNormal(un) {
			t.Fatalf("case %d: intersect %x or union %x not normal", i, in, un)
		}
		pa, pb := randomPoints(), randomPoints()
		ca, cb := cons{isPoints: true, points: pa}, cons{isPoints: true, points: pb}
		ra, rb := cons{rs: na}, cons{rs: nb}
		for _, u := range universe {
			ma, mb := member(a, u), member(b, u)
			inA, inB := containsPoint(pa, u), containsPoint(pb, u)
			switch {
			case member(na, u) != ma || na.contains(u) != ma:
				t.Fatalf("case %d: normalize changes %x", i, u)
			case member(in, u) != (ma && mb):
				t.Fatalf("case %d: intersect(%x, %x) = %x wrong at %x", i, na, nb, in, u)
			case member(un, u) != (ma || mb):
				t.Fatalf("case %d: union wrong at %x", i, u)
			case ma && !member(na.hull(), u):
				t.Fatalf("case %d: hull %x misses %x", i, na.hull(), u)
			case containsPoint(intersectCons(ca, cb).points, u) != (inA && inB):
				t.Fatalf("case %d: points ∩ points wrong at %x", i, u)
			case containsPoint(unionCons(ca, cb).points, u) != (inA || inB):
				t.Fatalf("case %d: points ∪ points wrong at %x", i, u)
			case containsPoint(intersectCons(ca, rb).points, u) != (inA && mb):
				t.Fatalf("case %d: points ∩ range wrong at %x", i, u)
			case containsPoint(intersectCons(rb, ca).points, u) != (inA && mb):
				t.Fatalf("case %d: range ∩ points wrong at %x", i, u)
			case member(unionCons(ca, rb).ranges(), u) != (inA || mb):
				t.Fatalf("case %d: points ∪ range wrong at %x", i, u)
			case member(intersectCons(ra, rb).rs, u) != (ma && mb):
				t.Fatalf("case %d: range ∩ range wrong at %x", i, u)
			case member(unionCons(ra, rb).rs, u) != (ma || mb):
				t.Fatalf("case %d: range ∪ range wrong at %x", i, u)
			}
		}
	}
}

func containsPoint(ps [][]byte, p []byte) bool {
	for _, x := range ps {
		if bytes.Equal(x, p) {
			return true
		}
	}
	return false
}
