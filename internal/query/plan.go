package query

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keys"
	"github.com/protobase/protobase/internal/schema"
)

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
func pointRange(p []byte) rng { return rng{lo: p, hi: keys.PrefixEnd(p)} }

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
			if !ok || (i > 0 && kc.path != acc.path) {
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
	out := cons{path: a.path, exact: a.exact && b.exact}
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
	if c.repeated {
		return cons{}, false
	}
	out := cons{path: c.field, exact: true}
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
		lo := keys.AppendStringPrefix(nil, c.v.s)
		out.rs = normalize(rset{{lo: lo, hi: keys.PrefixEnd(lo)}})
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
		return keys.AppendFloat32(dst, float32(f))
	}
	return keys.AppendFloat64(dst, f)
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
		return keys.AppendInt(nil, o.i), true
	case clsUint:
		if o.u > uintMax(c.kind) {
			return nil, false
		}
		return keys.AppendUint(nil, o.u), true
	case clsFloat32, clsFloat64:
		if !representable(c, o.f) {
			return nil, false
		}
		return appendFloat(nil, c, o.f), true
	case clsBool:
		return keys.AppendBool(nil, o.b), true
	case clsBytes:
		return keys.AppendBytes(nil, o.s), true
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
	return closed(keys.AppendInt(nil, lo), keys.AppendInt(nil, hi))
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
	return closed(keys.AppendUint(nil, lo), keys.AppendUint(nil, hi))
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
	return closed(keys.AppendBool(nil, lo == 1), keys.AppendBool(nil, hi == 1))
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
			r.hi = keys.PrefixEnd(enc)
		}
	case pb.Op_OP_LE:
		r.hi = keys.PrefixEnd(enc)
	case pb.Op_OP_GT:
		r.lo = keys.PrefixEnd(enc)
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
	enc := keys.AppendBytes(nil, c.v.s)
	var r rng
	switch c.op {
	case pb.Op_OP_LT:
		r.hi = enc
	case pb.Op_OP_LE:
		r.hi = keys.PrefixEnd(enc)
	case pb.Op_OP_GT:
		r.lo = keys.PrefixEnd(enc)
	case pb.Op_OP_GE:
		r.lo = enc
	}
	return normalize(rset{r})
}

// closed is the range of components from lo to hi, both included.
func closed(lo, hi []byte) rset { return normalize(rset{{lo: lo, hi: keys.PrefixEnd(hi)}}) }

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

// conjunct is one term of the top-level AND, with its key constraint.
type conjunct struct {
	n  *node
	c  cons
	ok bool
}

// flatten lists the conjuncts of n: the terms of (nested) ANDs.
func flatten(n *node, out []conjunct) []conjunct {
	if n.op == nAnd {
		for _, k := range n.kids {
			out = flatten(k, out)
		}
		return out
	}
	c, ok := consOf(n)
	return append(out, conjunct{n: n, c: c, ok: ok})
}

// fieldAcc gathers the constraints of the conjuncts on one field.
type fieldAcc struct {
	hasPts  bool
	pts     [][]byte
	ptsFrom []int // conjuncts giving points
	hasRng  bool
	rng     rset
	rngFrom []int // conjuncts giving ranges
}

func gather(conjs []conjunct) map[string]*fieldAcc {
	accs := map[string]*fieldAcc{}
	for i, cj := range conjs {
		if !cj.ok {
			continue
		}
		a := accs[cj.c.path]
		if a == nil {
			a = &fieldAcc{}
			accs[cj.c.path] = a
		}
		if cj.c.isPoints {
			if a.hasPts {
				a.pts = intersectPoints(a.pts, cj.c.points)
			} else {
				a.hasPts, a.pts = true, cj.c.points
			}
			a.ptsFrom = append(a.ptsFrom, i)
		} else {
			if a.hasRng {
				a.rng = intersect(a.rng, cj.c.rs)
			} else {
				a.hasRng, a.rng = true, cj.c.rs
			}
			a.rngFrom = append(a.rngFrom, i)
		}
	}
	for _, a := range accs {
		if a.hasPts && a.hasRng {
			a.pts = filterPoints(a.pts, a.rng)
		}
	}
	return accs
}

// candPlan is how one candidate would serve one conjunction. eval fills
// the shape, which is all the choice needs; build makes the ranges of the
// chosen one.
type candPlan struct {
	cand        *candidate
	eq          int  // leading key fields with equality
	tail        bool // a range on the field after them
	point       bool // every key field has equality
	constrained bool

	accs     map[string]*fieldAcc
	tailSet  rset
	hull     bool  // tailSet is a hull: it does not guarantee its conjuncts
	tailFrom []int // conjuncts giving tailSet
}

type planner struct {
	maxRanges int
}

// eval shapes the plan of the conjunction gathered in accs on candidate c:
// equalities on the longest key prefix whose point product fits in
// maxRanges, then a range on the next field.
func (pl *planner) eval(c *candidate, accs map[string]*fieldAcc) candPlan {
	n := len(c.fields)
	acc := func(i int) *fieldAcc { return accs[c.fields[i].Path] }
	k := 0
	for k < n && acc(k) != nil && acc(k).hasPts {
		k++
	}
	cp := candPlan{cand: c, accs: accs}
	for {
		count := 1
		for i := 0; i < k; i++ {
			count = satMul(count, len(acc(i).pts))
		}
		cp.tailSet, cp.tail, cp.hull, cp.tailFrom = nil, false, false, nil
		if k < n {
			if a := acc(k); a != nil {
				switch {
				case a.hasRng && !a.rng.whole():
					cp.tailSet, cp.tail, cp.tailFrom = a.rng, true, a.rngFrom
				case a.hasPts:
					// Equalities left out to respect maxRanges: read
					// from the first point to the last.
					cp.tailSet, cp.tail, cp.hull = rset{}, true, true
					if len(a.pts) > 0 {
						cp.tailSet = rset{pointRange(a.pts[0]), pointRange(a.pts[len(a.pts)-1])}.hull()
					}
				}
			}
		}
		if cp.tail && satMul(count, len(cp.tailSet)) > pl.maxRanges {
			cp.tailSet, cp.hull = cp.tailSet.hull(), true
		}
		if count <= pl.maxRanges || k == 0 {
			break
		}
		k--
	}
	cp.eq, cp.point, cp.constrained = k, k == n, k > 0 || cp.tail
	return cp
}

// build returns the key ranges of the plan and the conjuncts (indexes into
// conjs) they guarantee exactly.
func (cp *candPlan) build(conjs []conjunct) (ranges []Range, consumed []int) {
	c := cp.cand
	acc := func(i int) *fieldAcc { return cp.accs[c.fields[i].Path] }
	prefixes := [][]byte{c.prefix()}
	for i := 0; i < cp.eq; i++ {
		next := make([][]byte, 0, len(prefixes)*len(acc(i).pts))
		for _, p := range prefixes {
			for _, v := range acc(i).pts {
				next = append(next, concat(p, v))
			}
		}
		prefixes = next
	}
	var rs rset
	for _, p := range prefixes {
		end := keys.PrefixEnd(p)
		if !cp.tail {
			rs = append(rs, rng{lo: p, hi: end})
			continue
		}
		for _, r := range cp.tailSet {
			ar := rng{lo: concat(p, r.lo), hi: end}
			if r.hi != nil {
				ar.hi = concat(p, r.hi)
			}
			rs = append(rs, ar)
		}
	}
	ranges = toRanges(normalize(rs))
	for i := 0; i < cp.eq; i++ {
		consumed = appendExact(consumed, conjs, acc(i).ptsFrom)
		consumed = appendExact(consumed, conjs, acc(i).rngFrom)
	}
	if cp.tail && !cp.hull {
		consumed = appendExact(consumed, conjs, cp.tailFrom)
	}
	return ranges, consumed
}

func appendExact(dst []int, conjs []conjunct, from []int) []int {
	for _, i := range from {
		if conjs[i].c.exact {
			dst = append(dst, i)
		}
	}
	return dst
}

func concat(a, b []byte) []byte {
	out := make([]byte, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

func toRanges(rs rset) []Range {
	out := make([]Range, len(rs))
	for i, r := range rs {
		out[i] = Range{Start: r.lo, End: r.hi}
	}
	return out
}

func satMul(a, b int) int {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt32 || b > math.MaxInt32 {
		return math.MaxInt32
	}
	return min(a*b, math.MaxInt32)
}

// better reports whether plan a beats plan b.
func better(a, b *candPlan) bool {
	ap, bp := a.cand.isPK() && a.point, b.cand.isPK() && b.point
	if ap != bp {
		return ap
	}
	if a.eq != b.eq {
		return a.eq > b.eq
	}
	if a.tail != b.tail {
		return a.tail
	}
	return candLess(a.cand, b.cand)
}

// candLess orders candidates on ties: the primary key, unique indexes,
// then by name.
func candLess(a, b *candidate) bool {
	if a.isPK() != b.isPK() {
		return a.isPK()
	}
	if a.unique != b.unique {
		return a.unique
	}
	return a.name < b.name
}

// choice is the chosen access path.
type choice struct {
	cand        *candidate
	ranges      []Range
	point       bool
	constrained bool
	residual    *node
}

// plan chooses among cands (the primary key first, when allowed) for the
// expression root (nil: everything).
//
// A candidate that may not serve the query (see complete) is passed over;
// when none is left, the choice has no cand.
func (pl *planner) plan(root *node, cands []*candidate) choice {
	if root == nil {
		c := cands[0]
		if !complete(c, nil) {
			return choice{}
		}
		p := c.prefix()
		return choice{cand: c, ranges: []Range{{Start: p, End: keys.PrefixEnd(p)}}}
	}
	conjs := flatten(root, nil)
	if root.op == nOr && !conjs[0].ok && len(root.kids) > 0 {
		if ch, ok := pl.planOr(root, cands); ok {
			return ch
		}
	}
	accs := gather(conjs)
	var best candPlan
	for _, c := range cands {
		if !complete(c, accs) {
			continue
		}
		cp := pl.eval(c, accs)
		if best.cand == nil || better(&cp, &best) {
			best = cp
		}
	}
	if best.cand == nil {
		return choice{}
	}
	ranges, consumed := best.build(conjs)
	used := make([]bool, len(conjs))
	for _, i := range consumed {
		used[i] = true
	}
	var rest []*node
	for i, cj := range conjs {
		if !used[i] {
			rest = append(rest, cj.n)
		}
	}
	return choice{
		cand:        best.cand,
		ranges:      ranges,
		point:       best.point,
		constrained: best.constrained,
		residual:    andOf(rest),
	}
}

func andOf(ns []*node) *node {
	switch len(ns) {
	case 0:
		return nil
	case 1:
		return ns[0]
	}
	return &node{op: nAnd, kids: ns}
}

// orBranches lists the terms of (nested) ORs.
func orBranches(n *node, out []*node) []*node {
	if n.op == nOr {
		for _, k := range n.kids {
			out = orBranches(k, out)
		}
		return out
	}
	return append(out, n)
}

// planOr plans a top-level OR as the union of its branches' ranges on one
// candidate that constrains every branch.
func (pl *planner) planOr(root *node, cands []*candidate) (choice, bool) {
	branches := orBranches(root, nil)
	type branchIn struct {
		conjs []conjunct
		accs  map[string]*fieldAcc
	}
	ins := make([]branchIn, len(branches))
	for i, b := range branches {
		conjs := flatten(b, nil)
		ins[i] = branchIn{conjs: conjs, accs: gather(conjs)}
	}
	var (
		found     bool
		bestCand  *candidate
		bestWorst candPlan
		bestPlans []candPlan
	)
	for _, c := range cands {
		plans := make([]candPlan, len(branches))
		viable := true
		var worst candPlan
		for i, in := range ins {
			if !complete(c, in.accs) {
				viable = false
				break
			}
			plans[i] = pl.eval(c, in.accs)
			if !plans[i].constrained {
				viable = false
				break
			}
			if i == 0 || plans[i].eq < worst.eq || (plans[i].eq == worst.eq && !plans[i].tail) {
				worst = plans[i]
			}
		}
		if !viable {
			continue
		}
		if !found || betterWorst(&worst, &bestWorst) {
			found, bestCand, bestWorst, bestPlans = true, c, worst, plans
		}
	}
	if !found {
		return choice{}, false
	}
	var rs rset
	exact, point := true, true
	for i, p := range bestPlans {
		ranges, consumed := p.build(ins[i].conjs)
		for _, r := range ranges {
			rs = append(rs, rng{lo: r.Start, hi: r.End})
		}
		exact = exact && len(consumed) == len(ins[i].conjs)
		point = point && p.point
		// Each branch has at most maxRanges ranges; collapsing as soon as
		// the union has too many keeps the work linear in the branches.
		if len(rs) > pl.maxRanges {
			if rs = normalize(rs); len(rs) > pl.maxRanges {
				rs, exact, point = rs.hull(), false, false
			}
		}
	}
	rs = normalize(rs)
	ch := choice{cand: bestCand, ranges: toRanges(rs), point: point, constrained: true}
	if !exact {
		ch.residual = root
	}
	return ch, true
}

// betterWorst compares candidates by their least constrained branch.
func betterWorst(a, b *candPlan) bool {
	if a.eq != b.eq {
		return a.eq > b.eq
	}
	if a.tail != b.tail {
		return a.tail
	}
	return candLess(a.cand, b.cand)
}

// CanBeAbsent reports whether a key field can be absent from a record: the
// field has presence (proto2 optional, proto3 optional, a oneof member), or
// its path goes through a message field, which has presence. A field
// without presence (a proto3 scalar) is never absent: its default value is
// its value. A unique index enters no record in which such a field is
// absent (see "Unique indexes and absent values" in docs/design.md).
func CanBeAbsent(kf schema.KeyField) bool {
	return len(kf.Fields) > 1 || kf.Fields[len(kf.Fields)-1].HasPresence()
}

// complete reports whether a plan on candidate c finds every record that
// satisfies the conjunction gathered in accs (nil: no condition). The
// primary key and non-unique indexes hold every record; a unique index
// leaves out the records in which a key field that CanBeAbsent is absent.
// Such a record reads the field as its default value, so the index may
// serve the query only when the query's own constraint on every such field
// excludes that default: then no record lacking the field can match.
func complete(c *candidate, accs map[string]*fieldAcc) bool {
	if !c.unique || c.isPK() {
		return true
	}
	for _, kf := range c.fields {
		if !CanBeAbsent(kf) {
			continue
		}
		a := accs[kf.Path]
		if a == nil {
			return false
		}
		def := defaultKey(kf)
		switch {
		case a.hasPts:
			// gather already cut the points to the ranges.
			if slices.ContainsFunc(a.pts, func(p []byte) bool { return bytes.Equal(p, def) }) {
				return false
			}
		case a.hasRng:
			if a.rng.contains(def) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// defaultKey is the key encoding of the value a key field reads as when it
// is absent: its default (a proto2 field's declared one).
func defaultKey(kf schema.KeyField) []byte {
	fd := kf.Fields[len(kf.Fields)-1]
	d := fd.Default()
	switch kf.Kind {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind,
		protoreflect.Sint64Kind, protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
		return keys.AppendInt(nil, d.Int())
	case protoreflect.EnumKind:
		return keys.AppendInt(nil, int64(d.Enum()))
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind,
		protoreflect.Fixed64Kind:
		return keys.AppendUint(nil, d.Uint())
	case protoreflect.BoolKind:
		return keys.AppendBool(nil, d.Bool())
	case protoreflect.FloatKind:
		return keys.AppendFloat32(nil, float32(d.Float()))
	case protoreflect.DoubleKind:
		return keys.AppendFloat64(nil, d.Float())
	case protoreflect.StringKind:
		return keys.AppendBytes(nil, []byte(d.String()))
	}
	return keys.AppendBytes(nil, d.Bytes())
}

// sparseOrder is the error of a query ordered by a unique index that
// cannot serve it: the index leaves out records the query may match.
func sparseOrder(c *candidate) *Error {
	var fields []string
	for _, kf := range c.fields {
		if CanBeAbsent(kf) {
			fields = append(fields, kf.Path)
		}
	}
	return &Error{Field: "order.index", Reason: fmt.Sprintf(
		"unique index %q leaves out records without %s, which this query may match; "+
			"add a condition excluding the default value of %s, or order by another index",
		c.name, strings.Join(fields, ", "), strings.Join(fields, ", "))}
}
