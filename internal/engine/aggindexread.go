package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/store"
)

// aggIndexFor returns the READY aggregate index of t that answers the
// aggregation s under the filter match (nil: none): the same group fields
// in any order, only count(), sum and avg of fields it sums, and a filter
// that reads top-level group fields only, which is then tested on each
// group's values. why is set when such an index exists but may not be
// used.
func (t *recType) aggIndexFor(match *query.Filter, s *aggSpec) (a *aggIndex, why string) {
	for _, c := range t.aggs {
		if c.building || !c.covers(s) || !c.filters(match) {
			continue
		}
		if x := t.expiryIndex(); t.exp != nil && (x == nil || x.building) {
			// Expired records stay in the index until the reaper removes
			// them; a read subtracts them, found through the expiry
			// index, which is not ready.
			return nil, "aggregate index " + c.ix.Name + " not used: the type's expiry index is not ready, and the aggregate index counts expired records until they are removed"
		}
		return c, ""
	}
	return nil, ""
}

// covers reports whether a answers s.
func (a *aggIndex) covers(s *aggSpec) bool {
	if len(s.groups) != len(a.groups) {
		return false
	}
	for _, g := range s.groups {
		if a.groupAt(g.name) < 0 {
			return false
		}
	}
	for _, fn := range s.funcs {
		switch {
		case fn.op == pb.AggregateOp_AGGREGATE_OP_COUNT && fn.field == nil:
		case fn.op == pb.AggregateOp_AGGREGATE_OP_SUM || fn.op == pb.AggregateOp_AGGREGATE_OP_AVG:
			if a.sumAt(fn.field.name) < 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// filters reports whether match reads only top-level group fields of a,
// so that a group's values decide it.
func (a *aggIndex) filters(match *query.Filter) bool {
	for _, name := range match.Fields() {
		if i := a.groupAt(name); i < 0 || len(a.groups[i].path.Numbers()) != 1 {
			return false
		}
	}
	return true
}

// groupRecord appends a record holding only the group values vals of a
// (an absent one left out), which a filter on group fields reads as it
// reads any record of the group.
func (a *aggIndex) groupRecord(dst []byte, vals []aggVal) []byte {
	for i, f := range a.groups {
		v := vals[i]
		if !v.ok {
			continue
		}
		num := f.fd.Number()
		switch f.fd.Kind() {
		case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
			dst = protowire.AppendVarint(protowire.AppendTag(dst, num, protowire.VarintType), protowire.EncodeZigZag(v.i))
		case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
			dst = protowire.AppendVarint(protowire.AppendTag(dst, num, protowire.VarintType), v.u)
		case protoreflect.Sfixed32Kind:
			dst = protowire.AppendFixed32(protowire.AppendTag(dst, num, protowire.Fixed32Type), uint32(v.i))
		case protoreflect.Fixed32Kind:
			dst = protowire.AppendFixed32(protowire.AppendTag(dst, num, protowire.Fixed32Type), uint32(v.u))
		case protoreflect.FloatKind:
			dst = protowire.AppendFixed32(protowire.AppendTag(dst, num, protowire.Fixed32Type), math.Float32bits(float32(v.f)))
		case protoreflect.Sfixed64Kind:
			dst = protowire.AppendFixed64(protowire.AppendTag(dst, num, protowire.Fixed64Type), uint64(v.i))
		case protoreflect.Fixed64Kind:
			dst = protowire.AppendFixed64(protowire.AppendTag(dst, num, protowire.Fixed64Type), v.u)
		case protoreflect.DoubleKind:
			dst = protowire.AppendFixed64(protowire.AppendTag(dst, num, protowire.Fixed64Type), math.Float64bits(v.f))
		case protoreflect.StringKind, protoreflect.BytesKind:
			dst = protowire.AppendBytes(protowire.AppendTag(dst, num, protowire.BytesType), v.b)
		default: // int32, int64, enum, bool
			dst = protowire.AppendVarint(protowire.AppendTag(dst, num, protowire.VarintType), uint64(v.i))
		}
	}
	return dst
}

func (a *aggIndex) groupAt(name string) int {
	return slices.IndexFunc(a.groups, func(f *aggField) bool { return f.name == name })
}

func (a *aggIndex) sumAt(name string) int {
	return slices.IndexFunc(a.sums, func(f *aggField) bool { return f.name == name })
}

// aggregateFromIndex answers the aggregation s from the entries of a: one
// read per group, none per record.
func (e *Engine) aggregateFromIndex(ctx context.Context, c *compiled, a *aggIndex, s *aggSpec, maxBytes int64, h *hold) (*pb.QueryResponse, error) {
	start := time.Now()
	snap, err := e.st.OpenSnapshot()
	if err != nil {
		return nil, storeError(err)
	}
	defer snap.Close()
	// The expired records come out of their groups before the groups
	// count against the limit: a group of expired records only is none.
	var expired int
	var less map[string]*aggEntry
	if c.t.exp != nil {
		less, expired, err = expiredDeltas(ctx, snap, c.t, a, e.now())
	}
	var part *aggPart
	var n uint64
	if err == nil {
		var ents map[string]*aggEntry
		ents, part, n, err = readAggIndex(ctx, snap, a, s, c.plan.Match(), less, e.opts.MaxAggregateGroups, maxBytes)
		n += uint64(expired)
		if err == nil {
			err = a.groupAccs(part, ents, s)
		}
	}
	e.queryDone("Query", c, start, uint64(len(part.groups)), n)
	if err != nil {
		return nil, err
	}
	resp := &pb.QueryResponse{}
	if resp.Rows, err = s.rows(part); err != nil {
		return nil, err
	}
	if c.q.GetExplain() {
		resp.Plan = explainAggIndex(c, a, s)
		if expired > 0 {
			resp.Plan.Text += fmt.Sprintf(", less %d expired records not yet removed", expired)
		}
	}
	return e.aggregateAnswer(ctx, h, resp, maxBytes)
}

// readAggIndex reads every entry of a into groups of s, but groups whose
// values match leaves out, each less the entry of its key (with a's
// prefix) in less; a group left without records is none. ents holds each
// group's entry by the same key as part.groups (groupAccs then gives the
// groups their functions' values); n is the entries read.
func readAggIndex(ctx context.Context, v store.View, a *aggIndex, s *aggSpec, match *query.Filter, less map[string]*aggEntry, limit int, room int64) (ents map[string]*aggEntry, part *aggPart, n uint64, err error) {
	part = newAggPart(s, limit, room)
	ents = map[string]*aggEntry{}
	it, err := v.NewIterator(a.prefix, keyspace.PrefixEnd(a.prefix))
	if err != nil {
		return ents, part, 0, storeError(err)
	}
	defer it.Close()
	// Where each of s's groups is in a's key, and each function's sum.
	order := make([]int, len(s.groups))
	for i, g := range s.groups {
		order[i] = a.groupAt(g.name)
	}
	var rec []byte
	vals := make([]aggVal, len(a.groups))
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return ents, part, n, err
			}
		}
		key := it.Key()[len(a.prefix):]
		if err := decodeGroupKey(a.groups, key, vals); err != nil {
			return ents, part, n, aggIndexDamaged(a, err)
		}
		if match != nil {
			rec = a.groupRecord(rec[:0], vals)
			if ok, err := match.Match(rec); err != nil || !ok {
				if err != nil {
					return ents, part, n, aggIndexDamaged(a, err)
				}
				continue
			}
		}
		ent := new(aggEntry)
		if err := a.decode(it.Value(), ent); err != nil {
			return ents, part, n, aggIndexDamaged(a, err)
		}
		if d := less[string(it.Key())]; d != nil {
			if ent.merge(d); ent.count == 0 {
				continue
			}
		}
		if len(part.groups) >= limit {
			return ents, part, n, tooManyGroups(limit)
		}
		if part.used += int64(2*len(key)) + 64; part.used > room {
			return ents, part, n, apierror.Errorf(apierror.ResourceExhausted,
				"aggregate: the groups' values pass %d bytes, the most one response may hold (max response bytes; docs/limits.md)", room)
		}
		g := &aggGroup{vals: make([]aggVal, len(s.groups)), accs: make([]aggAcc, len(s.funcs))}
		for i, at := range order {
			g.vals[i] = vals[at]
			g.vals[i].b = append([]byte(nil), vals[at].b...)
		}
		part.groups[string(key)] = g
		ents[string(key)] = ent
	}
	if err := it.Error(); err != nil {
		return ents, part, n, storeError(err)
	}
	return ents, part, n, nil
}

// groupAccs sets the functions' values of each group of part from its
// entry in ents; a group without records left is dropped.
func (a *aggIndex) groupAccs(part *aggPart, ents map[string]*aggEntry, s *aggSpec) error {
	for k, g := range part.groups {
		ent := ents[k]
		if ent.count == 0 {
			delete(part.groups, k)
			continue
		}
		for j, fn := range s.funcs {
			g.accs[j] = a.acc(ent, fn)
		}
	}
	return nil
}

// expiredDeltas returns, by entry key of a, what the records of t that
// have expired at now and are still stored, found through t's expiry
// index, add to a's entries read at v (negated: merged, it takes them
// out), and how many there are. The aggregate index counts them until the
// reaper removes them, and no read may; the reaper keeps them few.
func expiredDeltas(ctx context.Context, v store.View, t *recType, a *aggIndex, now instant) (map[string]*aggEntry, int, error) {
	r := t.expiredRange(now)
	it, err := v.NewIterator(r.lower, r.upper)
	if err != nil {
		return nil, 0, storeError(err)
	}
	defer it.Close()
	var c aggChanges
	c.reset()
	var key, rec []byte
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if r.neverExpires(k) {
			if ok = it.SeekGE(r.zeroEnd); !ok {
				break
			}
			k = it.Key()
		}
		pk, err := r.x.pkOfEntry(k[len(r.ix.prefix):])
		if err != nil {
			continue // the checker reports a malformed entry
		}
		key = append(append(key[:0], t.prefix...), pk...)
		var found bool
		if rec, found, err = v.Get(key, rec); err != nil {
			return nil, n, storeError(err)
		}
		if !found || !t.expired(rec, now) {
			continue
		}
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, n, err
			}
		}
		if err := c.add(a, rec, -1); err != nil {
			return nil, n, err
		}
	}
	if err := it.Error(); err != nil {
		return nil, n, storeError(err)
	}
	return c.byKey, n, nil
}

// acc is function fn's state for the group of entry ent.
func (a *aggIndex) acc(ent *aggEntry, fn aggFunc) aggAcc {
	if fn.field == nil {
		return aggAcc{n: ent.count}
	}
	c := &ent.cells[a.sumAt(fn.field.name)]
	if fn.field.cls == vFloat {
		return aggAcc{n: c.n, f: c.float()}
	}
	return aggAcc{n: c.n, hi: c.hi, lo: c.lo}
}

func aggIndexDamaged(a *aggIndex, err error) error {
	return &apierror.Error{Code: apierror.Internal, Msg: "aggregate index " + a.ix.Name + " entry unreadable: " + err.Error(), Err: err}
}

var errGroupKey = errors.New("group key does not parse")

// decodeGroupKey reads the values aggField.appendKey wrote for groups.
func decodeGroupKey(groups []*aggField, b []byte, out []aggVal) error {
	for i, f := range groups {
		if len(b) == 0 {
			return errGroupKey
		}
		present := b[0] == 1
		b = b[1:]
		if !present {
			out[i] = aggVal{}
			continue
		}
		v := aggVal{ok: true}
		if f.cls == vBytes {
			l, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < l {
				return errGroupKey
			}
			v.b, b = b[k:k+int(l)], b[k+int(l):]
			out[i] = v
			continue
		}
		if len(b) < 8 {
			return errGroupKey
		}
		w := binary.BigEndian.Uint64(b)
		b = b[8:]
		switch f.cls {
		case vUint:
			v.u = w
		case vFloat:
			v.f = math.Float64frombits(w)
		default:
			v.i = int64(w)
		}
		out[i] = v
	}
	if len(b) != 0 {
		return errGroupKey
	}
	return nil
}

// explainAggIndex is the plan of an aggregation read from a.
func explainAggIndex(c *compiled, a *aggIndex, s *aggSpec) *pb.Plan {
	scan := c.plan.Explain().Text
	out := explainAggregate(c.plan, s, 1)
	out.Text = "aggregate index " + a.ix.Name + " [" + itoa(1) + " range]" + strings.TrimPrefix(out.Text, scan)
	out.Access, out.Index, out.Ranges, out.Filter = "aggregate_index", a.ix.Name, 1, c.plan.Match().String()
	head := "aggregate index " + a.ix.Name + " [1 range]"
	if out.Filter != "" {
		out.Text = head + " filter: " + out.Filter + strings.TrimPrefix(out.Text, head)
	}
	return out
}
