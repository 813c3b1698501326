package model_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Conditions of the version model: generated against the model (right
// and wrong versions, counts and highest versions, filters that match and
// that do not, now and then a malformed one), and evaluated on the state
// a batch starts from.

// vmFilter is a text filter and the model's evaluation of it.
type vmFilter struct {
	text string
	eval func(m protoreflect.Message) bool
}

var vmAccountFilters = []vmFilter{
	{`team = "red"`, func(m protoreflect.Message) bool { return vmGet(m, "team").String() == "red" }},
	{`team != "blue"`, func(m protoreflect.Message) bool { return vmGet(m, "team").String() != "blue" }},
	{`score > 0`, func(m protoreflect.Message) bool { return vmGet(m, "score").Int() > 0 }},
	{`score <= 1 and team != "red"`, func(m protoreflect.Message) bool {
		return vmGet(m, "score").Int() <= 1 && vmGet(m, "team").String() != "red"
	}},
	{`profile.city = "oslo"`, func(m protoreflect.Message) bool { return vmGet(m, "profile.city").String() == "oslo" }},
	{`balance >= 0`, func(m protoreflect.Message) bool { return vmGet(m, "balance").Int() >= 0 }},
	{`visits > 2 or profile.level = 1`, func(m protoreflect.Message) bool {
		return vmGet(m, "visits").Uint() > 2 || vmGet(m, "profile.level").Int() == 1
	}},
	{`email prefix "1"`, func(m protoreflect.Message) bool { return strings.HasPrefix(vmGet(m, "email").String(), "1") }},
}

var vmMemberFilters = []vmFilter{
	{`level = 1`, func(m protoreflect.Message) bool { return vmGet(m, "level").Int() == 1 }},
	{`org = "o1"`, func(m protoreflect.Message) bool { return vmGet(m, "org").String() == "o1" }},
	{`note = "n"`, func(m protoreflect.Message) bool { return vmGet(m, "note").String() == "n" }},
	{`level >= 1 and org != ""`, func(m protoreflect.Message) bool {
		return vmGet(m, "level").Int() >= 1 && vmGet(m, "org").String() != ""
	}},
	{`handle prefix "h1"`, func(m protoreflect.Message) bool { return strings.HasPrefix(vmGet(m, "handle").String(), "h1") }},
}

// The targets of a condition.
const (
	vmTargetRecord = iota
	vmTargetKey
	vmTargetQuery
)

// vmCond is one condition: what is sent, and how the model evaluates it.
type vmCond struct {
	pb     *pb.Condition
	desc   string
	target int
	t      *vmType
	pk     int // record and key targets
	record int // record targets: the index in the batch
	filter *vmFilter
	// Query targets: the first limit matches (0: all), in primary-key
	// order, descending when desc.
	limit int
	desc2 bool
}

// check returns how c, the condition at index i, fails against m, or nil.
func (c *vmCond) check(m vmModel, i int) *vmFail {
	if c.target == vmTargetQuery {
		count, maxv := c.matches(m)
		if (c.pb.Count != nil && *c.pb.Count != uint64(count)) || (c.pb.MaxVersion != nil && *c.pb.MaxVersion != maxv) {
			return &vmFail{code: codes.Aborted, record: -1, url: c.t.url(), cond: i, version: maxv}
		}
		return nil
	}
	var ver uint64
	cur := m[vmKey(c.t, c.pk)]
	if cur != nil {
		ver = cur.ver
	}
	if (c.pb.Version != nil && *c.pb.Version != ver) || (c.filter != nil && (cur == nil || !c.filter.eval(cur.msg))) {
		f := &vmFail{code: codes.Aborted, record: -1, url: c.t.url(), cond: i, version: ver}
		if c.target == vmTargetRecord {
			f.record = c.record
		}
		return f
	}
	return nil
}

// matches returns the number of records a query target matches (within
// its limit) and the highest version among them.
func (c *vmCond) matches(m vmModel) (int, uint64) {
	var got []*vmRec
	for _, r := range m.sorted(c.t) {
		if c.filter == nil || c.filter.eval(r.msg) {
			got = append(got, r)
		}
	}
	if c.desc2 {
		slices.Reverse(got)
	}
	if c.limit > 0 && len(got) > c.limit {
		got = got[:c.limit]
	}
	var maxv uint64
	for _, r := range got {
		maxv = max(maxv, r.ver)
	}
	return len(got), maxv
}

// vmGen makes the random parts of batches.
type vmGen struct {
	rng *rand.Rand
	mds map[string]protoreflect.MessageDescriptor
	// last is the highest version the test has seen, for wrong versions
	// that could have been right.
	last uint64
}

func (g *vmGen) md(t *vmType) protoreflect.MessageDescriptor { return g.mds[t.name] }

// version returns the right version v, or a wrong one that a client
// could plausibly hold: one before, one after, 0 (absent), or one the
// test saw.
func (g *vmGen) version(v uint64, right bool) uint64 {
	if right {
		return v
	}
	for {
		w := pick(g.rng, v+1, v-1, 0, g.rng.Uint64N(g.last+1), g.last)
		if w != v {
			return w
		}
	}
}

// conds adds 0-3 conditions to b, mostly right, against m.
func (g *vmGen) conds(m vmModel, b *vmBatch) {
	n := 0
	if len(b.recs) == 0 {
		n = 1 + g.rng.IntN(3) // a pure check
	} else if g.rng.IntN(5) < 3 {
		n = 1 + g.rng.IntN(3)
	}
	for range n {
		right := g.rng.IntN(6) > 0
		switch k := g.rng.IntN(3); {
		case k == 0 && len(b.recs) > 0:
			b.conds = append(b.conds, g.recordCond(m, b, right))
		case k == 1:
			b.conds = append(b.conds, g.queryCond(m, right))
		default:
			b.conds = append(b.conds, g.keyCond(m, right))
		}
	}
	if g.rng.IntN(30) == 0 {
		g.invalidCond(b)
	}
}

// recordCond targets one of b's records (of a known type).
func (g *vmGen) recordCond(m vmModel, b *vmBatch, right bool) *vmCond {
	var known []int
	for i, r := range b.recs {
		if r.t != nil {
			known = append(known, i)
		}
	}
	if len(known) == 0 {
		return g.keyCond(m, right)
	}
	i := pick(g.rng, known...)
	c := &vmCond{target: vmTargetRecord, t: b.recs[i].t, pk: b.recs[i].pk, record: i,
		pb: &pb.Condition{Target: &pb.Condition_Record{Record: uint32(i)}}}
	g.keyChecks(m, c, right)
	c.desc = fmt.Sprintf("record %d (%s#%d)%s", i, c.t.name, c.pk, c.desc)
	return c
}

// keyCond targets a record by a key record: mostly one the model holds,
// given as its key fields alone or as a whole record.
func (g *vmGen) keyCond(m vmModel, right bool) *vmCond {
	t := pick(g.rng, vmTypes...)
	k := g.rng.IntN(t.keys)
	if held := m.held(t); len(held) > 0 && g.rng.IntN(4) > 0 {
		k = pick(g.rng, held...)
	}
	key := vmNewRec(g.rng, t, g.md(t), k, g.rng.IntN(2) == 0)
	c := &vmCond{target: vmTargetKey, t: t, pk: k, pb: &pb.Condition{Target: &pb.Condition_Key{Key: key.any}}}
	g.keyChecks(m, c, right)
	c.desc = fmt.Sprintf("key %s#%d%s", t.name, k, c.desc)
	return c
}

// keyChecks gives a record or key target its version and/or filter,
// right (holding on m) or not.
func (g *vmGen) keyChecks(m vmModel, c *vmCond, right bool) {
	cur := m[vmKey(c.t, c.pk)]
	var ver uint64
	if cur != nil {
		ver = cur.ver
	}
	mode := g.rng.IntN(4) // 0, 1: version; 2: filter; 3: both
	if mode != 2 {
		v := g.version(ver, right)
		c.pb.Version = &v
		c.desc += fmt.Sprintf(" version %d (is %d)", v, ver)
	}
	if mode >= 2 {
		// A filter that holds when right is wanted, if one does.
		fs := slices.Clone(c.t.filters)
		g.rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
		f := &fs[0]
		for i := range fs {
			// With a version too, a wrong condition fails on it already.
			if cur != nil && fs[i].eval(cur.msg) == (right || mode == 3) {
				f = &fs[i]
				break
			}
		}
		c.filter = f
		c.pb.Filter = f.text
		c.desc += fmt.Sprintf(" filter %q", f.text)
	}
}

// queryCond targets the matches of a query: a filter or none, a limit
// or none, with its count and/or highest version, right or not.
func (g *vmGen) queryCond(m vmModel, right bool) *vmCond {
	return g.queryCondOf(m, pick(g.rng, vmTypes...), right)
}

func (g *vmGen) queryCondOf(m vmModel, t *vmType, right bool) *vmCond {
	q := &pb.Query{Type: t.name}
	c := &vmCond{target: vmTargetQuery, t: t}
	if g.rng.IntN(4) > 0 {
		c.filter = &t.filters[g.rng.IntN(len(t.filters))]
		q.Filter = c.filter.text
	}
	if g.rng.IntN(3) == 0 {
		c.limit = 1 + g.rng.IntN(4)
		c.desc2 = g.rng.IntN(2) == 0
		q.Limit = uint64(c.limit)
		q.Order = &pb.Order{Descending: c.desc2}
	}
	c.pb = &pb.Condition{Target: &pb.Condition_Query{Query: q}}
	count, maxv := c.matches(m)
	mode := g.rng.IntN(3) // 0: count; 1: highest version; 2: both
	if mode != 1 {
		n := uint64(count)
		if !right && (mode == 0 || g.rng.IntN(2) == 0) {
			if n > 0 && g.rng.IntN(2) == 0 {
				n--
			} else {
				n++
			}
			right = true // the count fails the condition: the version may hold
		}
		c.pb.Count = &n
	}
	if mode != 0 {
		v := g.version(maxv, right)
		c.pb.MaxVersion = &v
	}
	c.desc = fmt.Sprintf("query %s filter %q limit %d desc %v count %v max_version %v (are %d, %d)",
		t.name, q.Filter, c.limit, c.desc2, vmOpt(c.pb.Count), vmOpt(c.pb.MaxVersion), count, maxv)
	return c
}

func vmOpt(p *uint64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// invalidCond replaces or adds a malformed condition: the batch is
// INVALID_ARGUMENT naming it, whatever else it holds.
func (g *vmGen) invalidCond(b *vmBatch) {
	one := uint64(1)
	t := pick(g.rng, vmTypes...)
	key := vmNewRec(g.rng, t, g.md(t), 0, true).any
	cases := []struct {
		desc string
		c    *pb.Condition
	}{
		{"no check", &pb.Condition{Target: &pb.Condition_Key{Key: key}}},
		{"no target", &pb.Condition{Version: &one}},
		{"version on a query", &pb.Condition{Target: &pb.Condition_Query{Query: &pb.Query{Type: t.name}}, Version: &one}},
		{"filter on a query", &pb.Condition{Target: &pb.Condition_Query{Query: &pb.Query{Type: t.name}}, Filter: t.filters[0].text}},
		{"count on a key", &pb.Condition{Target: &pb.Condition_Key{Key: key}, Count: &one}},
		{"max_version on a record", &pb.Condition{Target: &pb.Condition_Record{Record: 0}, MaxVersion: &one}},
		{"record out of range", &pb.Condition{Target: &pb.Condition_Record{Record: uint32(len(b.recs) + g.rng.IntN(3))}, Version: &one}},
		{"key of an unknown type", &pb.Condition{Target: &pb.Condition_Key{Key: &anypb.Any{TypeUrl: "type.googleapis.com/vm.Nope", Value: []byte{8, 1}}}, Version: &one}},
		{"filter that does not parse", &pb.Condition{Target: &pb.Condition_Key{Key: key}, Filter: "score >"}},
		{"filter on no field", &pb.Condition{Target: &pb.Condition_Key{Key: key}, Filter: "nope = 1"}},
		{"query of an unknown type", &pb.Condition{Target: &pb.Condition_Query{Query: &pb.Query{Type: "vm.Nope"}}, Count: &one}},
		{"query that does not compile", &pb.Condition{Target: &pb.Condition_Query{Query: &pb.Query{Type: t.name, Filter: "team = = 1"}}, Count: &one}},
	}
	k := cases[g.rng.IntN(len(cases))]
	i := g.rng.IntN(len(b.conds) + 1)
	c := &vmCond{pb: k.c, desc: "invalid: " + k.desc}
	if i == len(b.conds) {
		b.conds = append(b.conds, c)
	} else {
		b.conds[i] = c
	}
	b.invalid = &vmFail{code: codes.InvalidArgument, record: -1, cond: i}
}
