package query

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/schema"
)

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
		if cj.c.repeated && a.hasPts {
			continue // another element: left to the filter (see cons.repeated)
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
		end := orderedcode.PrefixEnd(p)
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
	eq          int // leading key fields with equality in every range (0: unknown)
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
		return choice{cand: c, ranges: []Range{{Start: p, End: orderedcode.PrefixEnd(p)}}}
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
		eq:          best.eq,
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
	if len(branches) == 0 {
		// Only empty ORs, nested: the filter matches nothing, and no
		// candidate constrains a branch. The scan's residual says so.
		return choice{}, false
	}
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
// satisfies the conjunction gathered in accs (nil: no condition). An index
// on a repeated field holds only the records with an element: it may serve
// a query that requires one, an equality (or IN) on the field. Otherwise
// the primary key and non-unique indexes hold every record; a unique index
// leaves out the records in which a key field that CanBeAbsent is absent.
// Such a record reads the field as its default value, so the index may
// serve the query only when the query's own constraint on every such field
// excludes that default: then no record lacking the field can match.
func complete(c *candidate, accs map[string]*fieldAcc) bool {
	if c.isPK() {
		return true
	}
	for _, kf := range c.fields {
		if a := accs[kf.Path]; kf.Repeated && (a == nil || !a.hasPts) {
			return false
		}
	}
	if !c.unique {
		return true
	}
	for _, kf := range c.fields {
		if kf.Repeated || !CanBeAbsent(kf) {
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
		return orderedcode.AppendInt(nil, d.Int())
	case protoreflect.EnumKind:
		return orderedcode.AppendInt(nil, int64(d.Enum()))
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind,
		protoreflect.Fixed64Kind:
		return orderedcode.AppendUint(nil, d.Uint())
	case protoreflect.BoolKind:
		return orderedcode.AppendBool(nil, d.Bool())
	case protoreflect.FloatKind:
		return orderedcode.AppendFloat32(nil, float32(d.Float()))
	case protoreflect.DoubleKind:
		return orderedcode.AppendFloat64(nil, d.Float())
	case protoreflect.StringKind:
		return orderedcode.AppendBytes(nil, []byte(d.String()))
	}
	return orderedcode.AppendBytes(nil, d.Bytes())
}

// sparseOrder is the error of a query ordered by a unique index that
// cannot serve it: the index leaves out records the query may match.
func sparseOrder(c *candidate) *Error {
	for _, kf := range c.fields {
		if kf.Repeated {
			return &Error{Field: "order.index", Reason: fmt.Sprintf(
				"index %q has entries only for the elements of the repeated field %s, and leaves out records without one, "+
					"which this query may match; add a condition %s = value (or IN), or order by another index",
				c.name, kf.Path, kf.Path)}
		}
	}
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
