package query

import (
	"bytes"
	"math"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/orderedcode"
)

// The range algebra the planner works in: sets of key ranges relative to a
// candidate's prefix, the constraints a comparison puts on one key field,
// and the point keys and ranges a comparison selects.

// rng is a range of key suffixes relative to a key prefix P: the keys P+x
// with lo <= x < hi. An empty lo is the start of P's keys; a nil hi is
// their end, PrefixEnd(P).
//
// Bounds derived from values are aligned on component boundaries: a value's
// encoding is never split between inside and outside (key encodings are
// self-delimiting), so a range holds whole components, and with them every
// key that continues after them.
type rng struct{ lo, hi []byte }

// rset is a sorted list of disjoint, non-empty ranges.
type rset []rng

func (r rng) empty() bool { return r.hi != nil && bytes.Compare(r.lo, r.hi) >= 0 }

// cmpHi compares upper bounds, nil being +inf.
func cmpHi(a, b []byte) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return bytes.Compare(a, b)
}

// normalize sorts rs, drops empty ranges and merges overlapping ones. It
// does not modify rs. Adjacent ranges stay apart, so that the ranges of
// equal key points stay one per point.
func normalize(rs rset) rset {
	out := make(rset, 0, len(rs))
	for _, r := range rs {
		if !r.empty() {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b rng) int { return bytes.Compare(a.lo, b.lo) })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && (merged[n-1].hi == nil || bytes.Compare(r.lo, merged[n-1].hi) < 0) {
			if cmpHi(r.hi, merged[n-1].hi) > 0 {
				merged[n-1].hi = r.hi
			}
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// intersect returns the ranges in both a and b.
func intersect(a, b rset) rset {
	var out rset
	for i, j := 0, 0; i < len(a) && j < len(b); {
		r := rng{lo: a[i].lo, hi: a[i].hi}
		if bytes.Compare(b[j].lo, r.lo) > 0 {
			r.lo = b[j].lo
		}
		if cmpHi(b[j].hi, r.hi) < 0 {
			r.hi = b[j].hi
		}
		if !r.empty() {
			out = append(out, r)
		}
		if cmpHi(a[i].hi, b[j].hi) < 0 {
			i++
		} else {
			j++
		}
	}
	return out
}

// contains reports whether the encoding p of one component is in rs.
func (rs rset) contains(p []byte) bool {
	for _, r := range rs {
		if bytes.Compare(p, r.lo) >= 0 && (r.hi == nil || bytes.Compare(p, r.hi) < 0) {
			return true
		}
	}
	return false
}

func (rs rset) whole() bool { return len(rs) == 1 && len(rs[0].lo) == 0 && rs[0].hi == nil }

// hull is the smallest single range covering rs.
func (rs rset) hull() rset {
	if len(rs) <= 1 {
		return rs
	}
	return rset{{lo: rs[0].lo, hi: rs[len(rs)-1].hi}}
}

// pointRange is the range of keys whose component is the value encoded as
// p.
func pointRange(p []byte) rng { return rng{lo: p, hi: orderedcode.PrefixEnd(p)} }

// cons is what one conjunct says about one singular key-able field: its
// value is one of points (isPoints), or its encoding lies in rs.
type cons struct {
	path     string
	isPoints bool
	points   [][]byte // sorted, unique encodings
	rs       rset
	// exact: the constraint holds exactly for the records whose key
	// component satisfies it, so a plan using it needs no re-check.
	exact bool
	// repeated: the path is a repeated field and the constraint says that
	// some element is one of points. Two such constraints do not
	// intersect (tags = "a" AND tags = "b" holds for a record with both),
	// and only equalities have one: an index on the field has an entry per
	// element, found at each point.
	repeated bool
}

// consOf extracts the key constraint of a conjunct: a comparison on a
// singular field, or an OR (or AND) of such constraints on one field.
func consOf(n *node) (cons, bool) {
	switch n.op {
	case nCmp:
		return cmpCons(n.c)
	case nOr, nAnd:
		if len(n.kids) == 0 {
			return cons{}, false
		}
		var acc cons
		for i, k := range n.kids {
			kc, ok := consOf(k)
			if !ok || (i > 0 && kc.path != acc.path) || (kc.repeated && n.op == nAnd) {
				return cons{}, false
			}
			switch {
			case i == 0:
				acc = kc
			case n.op == nOr:
				acc = unionCons(acc, kc)
			default:
				acc = intersectCons(acc, kc)
			}
		}
		return acc, true
	}
	return cons{}, false
}

func (c cons) ranges() rset {
	if !c.isPoints {
		return c.rs
	}
	rs := make(rset, len(c.points))
	for i, p := range c.points {
		rs[i] = pointRange(p)
	}
	return normalize(rs)
}

func unionCons(a, b cons) cons {
	out := cons{path: a.path, exact: a.exact && b.exact, repeated: a.repeated}
	if a.isPoints && b.isPoints {
		out.isPoints = true
		out.points = sortedPoints(append(slices.Clip(a.points), b.points...))
		return out
	}
	out.rs = normalize(append(slices.Clip(a.ranges()), b.ranges()...))
	return out
}

func intersectCons(a, b cons) cons {
	out := cons{path: a.path, exact: a.exact && b.exact}
	switch {
	case a.isPoints && b.isPoints:
		out.isPoints = true
		out.points = intersectPoints(a.points, b.points)
	case a.isPoints:
		out.isPoints = true
		out.points = filterPoints(a.points, b.rs)
	case b.isPoints:
		out.isPoints = true
		out.points = filterPoints(b.points, a.rs)
	default:
		out.rs = intersect(a.rs, b.rs)
	}
	return out
}

func sortedPoints(ps [][]byte) [][]byte {
	slices.SortFunc(ps, bytes.Compare)
	return slices.CompactFunc(ps, bytes.Equal)
}

func intersectPoints(a, b [][]byte) [][]byte {
	out := [][]byte{}
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch c := bytes.Compare(a[i], b[j]); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func filterPoints(ps [][]byte, rs rset) [][]byte {
	out := [][]byte{}
	for _, p := range ps {
		if rs.contains(p) {
			out = append(out, p)
		}
	}
	return out
}

// cmpCons is the key constraint of one comparison, if it has one.
func cmpCons(c *cmpNode) (cons, bool) {
	if c.repeated && c.op != pb.Op_OP_EQ && c.op != pb.Op_OP_IN {
		return cons{}, false
	}
	out := cons{path: c.field, exact: true, repeated: c.repeated}
	switch c.op {
	case pb.Op_OP_EQ:
		out.isPoints = true
		out.points = [][]byte{}
		if p, ok := pointKey(c, c.v); ok {
			out.points = append(out.points, p)
		}
	case pb.Op_OP_IN:
		out.isPoints = true
		out.points = make([][]byte, 0, len(c.in))
		for _, o := range c.in {
			if p, ok := pointKey(c, o); ok {
				out.points = append(out.points, p)
			}
		}
		out.points = sortedPoints(out.points)
	case pb.Op_OP_LT, pb.Op_OP_LE, pb.Op_OP_GT, pb.Op_OP_GE:
		out.rs, out.exact = rangeOf(c)
	case pb.Op_OP_PREFIX:
		lo := orderedcode.AppendStringPrefix(nil, c.v.s)
		out.rs = normalize(rset{{lo: lo, hi: orderedcode.PrefixEnd(lo)}})
	default:
		return cons{}, false
	}
	return out, true
}

// intDomain is the range of values a signed field of kind k holds.
func intDomain(k protoreflect.Kind) (int64, int64) {
	if is32(k) {
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

func uintMax(k protoreflect.Kind) uint64 {
	if is32(k) {
		return math.MaxUint32
	}
	return math.MaxUint64
}

// representable reports whether the operand of a float comparison is a
// value the field can hold exactly (NaN is not: it equals nothing).
func representable(c *cmpNode, f float64) bool {
	if f != f {
		return false
	}
	return c.cls == clsFloat64 || float64(float32(f)) == f || math.IsInf(f, 0)
}

func appendFloat(dst []byte, c *cmpNode, f float64) []byte {
	if c.cls == clsFloat32 {
		return orderedcode.AppendFloat32(dst, float32(f))
	}
	return orderedcode.AppendFloat64(dst, f)
}

// pointKey encodes the key component a field equal to o has; false when
// no value of the field equals o.
func pointKey(c *cmpNode, o operand) ([]byte, bool) {
	switch c.cls {
	case clsInt:
		lo, hi := intDomain(c.kind)
		if o.i < lo || o.i > hi {
			return nil, false
		}
		return orderedcode.AppendInt(nil, o.i), true
	case clsUint:
		if o.u > uintMax(c.kind) {
			return nil, false
		}
		return orderedcode.AppendUint(nil, o.u), true
	case clsFloat32, clsFloat64:
		if !representable(c, o.f) {
			return nil, false
		}
		return appendFloat(nil, c, o.f), true
	case clsBool:
		return orderedcode.AppendBool(nil, o.b), true
	case clsBytes:
		return orderedcode.AppendBytes(nil, o.s), true
	}
	return nil, false
}

// rangeOf is the key range of an ordering comparison (LT, LE, GT, GE),
// and whether the range is exact (needs no filter).
func rangeOf(c *cmpNode) (rset, bool) {
	switch c.cls {
	case clsInt:
		return intRange(c), true
	case clsUint:
		return uintRange(c), true
	case clsBool:
		return boolRange(c), true
	case clsFloat32, clsFloat64:
		return floatRange(c)
	case clsBytes:
		return bytesRange(c), true
	}
	return nil, false
}

func intRange(c *cmpNode) rset {
	dmin, dmax := intDomain(c.kind)
	lo, hi, ok := closedInt(c.op, c.v.i, dmin, dmax)
	if !ok {
		return rset{}
	}
	if lo == dmin && hi == dmax {
		return rset{{}}
	}
	return closed(orderedcode.AppendInt(nil, lo), orderedcode.AppendInt(nil, hi))
}

func uintRange(c *cmpNode) rset {
	dmax := uintMax(c.kind)
	lo, hi, ok := closedUint(c.op, c.v.u, dmax)
	if !ok {
		return rset{}
	}
	if lo == 0 && hi == dmax {
		return rset{{}}
	}
	return closed(orderedcode.AppendUint(nil, lo), orderedcode.AppendUint(nil, hi))
}

func boolRange(c *cmpNode) rset {
	v := uint64(0)
	if c.v.b {
		v = 1
	}
	lo, hi, ok := closedUint(c.op, v, 1)
	if !ok {
		return rset{}
	}
	if lo == 0 && hi == 1 {
		return rset{{}}
	}
	return closed(orderedcode.AppendBool(nil, lo == 1), orderedcode.AppendBool(nil, hi == 1))
}

func floatRange(c *cmpNode) (rset, bool) {
	f := c.v.f
	if f != f {
		return rset{}, true // NaN orders with nothing
	}
	enc := appendFloat(nil, c, f)
	// An operand the field cannot hold (beyond float32 range) is rounded
	// to an infinity for the key: the bound must then include it.
	incl := !representable(c, f)
	var r rng
	switch c.op {
	case pb.Op_OP_LT:
		r.hi = enc
		if incl {
			r.hi = orderedcode.PrefixEnd(enc)
		}
	case pb.Op_OP_LE:
		r.hi = orderedcode.PrefixEnd(enc)
	case pb.Op_OP_GT:
		r.lo = orderedcode.PrefixEnd(enc)
		if incl {
			r.lo = enc
		}
	case pb.Op_OP_GE:
		r.lo = enc
	}
	// Lower bounds run to the end, where NaN sorts: not exact.
	exact := !incl && (c.op == pb.Op_OP_LT || c.op == pb.Op_OP_LE)
	return normalize(rset{r}), exact
}

func bytesRange(c *cmpNode) rset {
	enc := orderedcode.AppendBytes(nil, c.v.s)
	var r rng
	switch c.op {
	case pb.Op_OP_LT:
		r.hi = enc
	case pb.Op_OP_LE:
		r.hi = orderedcode.PrefixEnd(enc)
	case pb.Op_OP_GT:
		r.lo = orderedcode.PrefixEnd(enc)
	case pb.Op_OP_GE:
		r.lo = enc
	}
	return normalize(rset{r})
}

// closed is the range of components from lo to hi, both included.
func closed(lo, hi []byte) rset { return normalize(rset{{lo: lo, hi: orderedcode.PrefixEnd(hi)}}) }

// closedInt turns an ordering comparison with v into a closed interval of
// the domain [dmin, dmax]; false when it is empty.
func closedInt(op pb.Op, v, dmin, dmax int64) (lo, hi int64, ok bool) {
	lo, hi = dmin, dmax
	switch op {
	case pb.Op_OP_LT:
		if v <= dmin {
			return 0, 0, false
		}
		hi = min(v-1, dmax)
	case pb.Op_OP_LE:
		if v < dmin {
			return 0, 0, false
		}
		hi = min(v, dmax)
	case pb.Op_OP_GT:
		if v >= dmax {
			return 0, 0, false
		}
		lo = max(v+1, dmin)
	case pb.Op_OP_GE:
		if v > dmax {
			return 0, 0, false
		}
		lo = max(v, dmin)
	}
	return lo, hi, lo <= hi
}

func closedUint(op pb.Op, v, dmax uint64) (lo, hi uint64, ok bool) {
	lo, hi = 0, dmax
	switch op {
	case pb.Op_OP_LT:
		if v == 0 {
			return 0, 0, false
		}
		hi = min(v-1, dmax)
	case pb.Op_OP_LE:
		hi = min(v, dmax)
	case pb.Op_OP_GT:
		if v >= dmax {
			return 0, 0, false
		}
		lo = v + 1
	case pb.Op_OP_GE:
		if v > dmax {
			return 0, 0, false
		}
		lo = v
	}
	return lo, hi, lo <= hi
}
