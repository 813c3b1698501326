package engine

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/store"
)

// maxAggregateParallelism caps the parts an aggregate reads at once; the
// parts of a query share one snapshot.
const maxAggregateParallelism = 16

// aggAcc is one function's state in one group. Integer sums are kept in
// 128 bits (hi, lo), so that their result does not depend on the order the
// parallel parts add in: only the final sum must fit its type.
type aggAcc struct {
	n  uint64 // values counted
	hi int64
	lo uint64
	f  float64
	fc float64 // f's compensation (addCompensated)
	v  aggVal  // min or max; its bytes are the group's own
}

// aggGroup is one group: its values (bytes copied) and its functions' state.
type aggGroup struct {
	vals []aggVal
	accs []aggAcc
	fp   []uint64 // its values' fingerprint (aggField.fingerprint), nil if they have none
}

// aggPart aggregates the records of one part of the key ranges.
type aggPart struct {
	s       *aggSpec
	groups  map[string]*aggGroup
	limit   int   // of groups
	room    int64 // bytes the groups' values may take
	used    int64
	key     []byte
	vals    []aggVal
	scratch []byte
	fp      []uint64                  // the fingerprint of the values just read (group)
	cache   [groupCacheSize]*aggGroup // see group
	err     error
}

func newAggPart(s *aggSpec, limit int, room int64) *aggPart {
	return &aggPart{s: s, groups: make(map[string]*aggGroup), limit: limit, room: room, vals: make([]aggVal, len(s.fields)),
		fp: make([]uint64, fpWords*len(s.groups))}
}

// add aggregates one matching record; false stops the part, with err set.
func (p *aggPart) add(rec []byte) bool {
	if err := p.read(rec); err != nil {
		p.err = unreadable(err)
		return false
	}
	grp := p.group()
	if grp == nil {
		return false
	}
	p.accumulate(grp)
	return true
}

func unreadable(err error) error {
	return &apierror.Error{Code: apierror.Internal, Msg: "stored record unreadable: " + err.Error(), Err: err}
}

// newGroup makes the group of key, of the values just read, within the
// bounds.
func (p *aggPart) newGroup(key string) *aggGroup {
	if len(p.groups) >= p.limit {
		p.err = tooManyGroups(p.limit)
		return nil
	}
	grp := &aggGroup{vals: make([]aggVal, len(p.s.groups)), accs: make([]aggAcc, len(p.s.funcs))}
	for i, at := range p.s.groupAt {
		v := p.vals[at]
		v.b = append([]byte(nil), v.b...)
		grp.vals[i] = v
	}
	p.used += int64(2*len(key)+8*len(p.fp)) + 64
	if p.used > p.room {
		p.err = apierror.Errorf(apierror.ResourceExhausted,
			"aggregate: the groups' values pass %d bytes, the most one response may hold (max response bytes; docs/limits.md)", p.room)
		return nil
	}
	p.groups[key] = grp
	return grp
}

func tooManyGroups(limit int) error {
	return &apierror.Error{Code: apierror.ResourceExhausted, Field: "query.aggregate.group_by",
		Msg: fmt.Sprintf("aggregate: more than %d groups (max aggregate groups; docs/limits.md): group by fewer or coarser fields, or filter", limit)}
}

// add takes one value of fn's field.
func (a *aggAcc) add(fn *aggFunc, v aggVal) {
	f := fn.field
	switch fn.op {
	case pb.AggregateOp_AGGREGATE_OP_COUNT:
		a.n++
	case pb.AggregateOp_AGGREGATE_OP_SUM, pb.AggregateOp_AGGREGATE_OP_AVG:
		a.n++
		switch f.cls {
		case vInt:
			a.addInt(v.i>>63, uint64(v.i))
		case vUint:
			a.addInt(0, v.u)
		default:
			addCompensated(&a.f, &a.fc, v.f)
		}
	case pb.AggregateOp_AGGREGATE_OP_MIN, pb.AggregateOp_AGGREGATE_OP_MAX:
		c := f.compare(v, a.v)
		if a.n == 0 || (fn.op == pb.AggregateOp_AGGREGATE_OP_MIN && c < 0) || (fn.op == pb.AggregateOp_AGGREGATE_OP_MAX && c > 0) {
			own := a.v.b[:0]
			own = append(own, v.b...) // the record's bytes go with the read
			a.v = v
			a.v.b = own
		}
		a.n++
	}
}

// addInt adds the 128-bit (hi, lo).
func (a *aggAcc) addInt(hi int64, lo uint64) {
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, lo, 0)
	a.hi += hi + int64(carry)
}

// merge adds b, the same function's state in another part, to a.
func (a *aggAcc) merge(fn *aggFunc, b *aggAcc) {
	switch {
	case b.n == 0:
	case fn.op == pb.AggregateOp_AGGREGATE_OP_MIN || fn.op == pb.AggregateOp_AGGREGATE_OP_MAX:
		c := fn.field.compare(b.v, a.v)
		if a.n == 0 || (fn.op == pb.AggregateOp_AGGREGATE_OP_MIN && c < 0) || (fn.op == pb.AggregateOp_AGGREGATE_OP_MAX && c > 0) {
			a.v = b.v // b's bytes are its group's own, and b is merged once
		}
		a.n += b.n
	default:
		a.n += b.n
		a.addInt(b.hi, b.lo)
		mergeCompensated(&a.f, &a.fc, b.f, b.fc)
	}
}

// addCompensated adds x to the sum *f, keeping in *comp the part of the
// exact sum that *f, rounded, lacks (Neumaier's compensated summation):
// the sum is *f + *comp. A sum that is not finite is kept as it is.
func addCompensated(f, comp *float64, x float64) {
	s := *f + x
	if math.IsInf(s, 0) || math.IsNaN(s) {
		*f = s
		return
	}
	if math.Abs(*f) >= math.Abs(x) {
		*comp += (*f - s) + x
	} else {
		*comp += (x - s) + *f
	}
	*f = s
}

// mergeCompensated adds the compensated sum (g, gcomp) to (*f, *comp).
func mergeCompensated(f, comp *float64, g, gcomp float64) {
	addCompensated(f, comp, g)
	*comp += gcomp
}

// value is the function's result, or OUT_OF_RANGE for an integer sum past
// its type.
func (a *aggAcc) value(i int, fn *aggFunc) (*structpb.Value, error) {
	if fn.op == pb.AggregateOp_AGGREGATE_OP_COUNT {
		return uintValue(a.n), nil
	}
	if a.n == 0 {
		return structpb.NewNullValue(), nil
	}
	f := fn.field
	switch fn.op {
	case pb.AggregateOp_AGGREGATE_OP_SUM:
		switch f.cls {
		case vInt:
			if a.hi != int64(a.lo)>>63 {
				return nil, overflowErr(i, f, "int64")
			}
			return intValue(int64(a.lo)), nil
		case vUint:
			if a.hi != 0 {
				return nil, overflowErr(i, f, "uint64")
			}
			return uintValue(a.lo), nil
		}
		return floatValue(a.f + a.fc), nil
	case pb.AggregateOp_AGGREGATE_OP_AVG:
		sum := a.f + a.fc
		switch {
		case f.cls == vFloat:
		case f.cls == vInt && a.hi == int64(a.lo)>>63:
			sum = float64(int64(a.lo)) // exact in 64 bits: no cancellation of the halves
		default:
			sum = float64(a.hi)*(1<<64) + float64(a.lo)
		}
		return floatValue(sum / float64(a.n)), nil
	}
	return f.value(a.v), nil
}

func overflowErr(i int, f *aggField, typ string) error {
	return &apierror.Error{Code: apierror.OutOfRange, Field: "query.aggregate.functions[" + strconv.Itoa(i) + "].field",
		Msg: "aggregate: sum(" + f.name + ") overflows " + typ + " (field " + f.name + ")"}
}

// value renders v as a JSON value (see pb.AggregateRow).
func (f *aggField) value(v aggVal) *structpb.Value {
	if !v.ok {
		return structpb.NewNullValue()
	}
	switch f.cls {
	case vInt:
		if ed := f.fd.Enum(); ed != nil {
			if ev := ed.Values().ByNumber(protoreflect.EnumNumber(v.i)); ev != nil {
				return structpb.NewStringValue(string(ev.Name()))
			}
		}
		return intValue(v.i)
	case vUint:
		return uintValue(v.u)
	case vFloat:
		return floatValue(v.f)
	case vBool:
		return structpb.NewBoolValue(v.i != 0)
	case vTime:
		return structpb.NewStringValue(time.Unix(v.i, int64(v.n)).UTC().Format(time.RFC3339Nano))
	}
	if f.fd.Kind() == protoreflect.BytesKind {
		return structpb.NewStringValue(base64.StdEncoding.EncodeToString(v.b))
	}
	return structpb.NewStringValue(string(v.b))
}

// exactInts is the largest magnitude a JSON number holds exactly.
const exactInts = 1 << 53

func intValue(i int64) *structpb.Value {
	if i >= -exactInts && i <= exactInts {
		return structpb.NewNumberValue(float64(i))
	}
	return structpb.NewStringValue(strconv.FormatInt(i, 10))
}

func uintValue(u uint64) *structpb.Value {
	if u <= exactInts {
		return structpb.NewNumberValue(float64(u))
	}
	return structpb.NewStringValue(strconv.FormatUint(u, 10))
}

func floatValue(f float64) *structpb.Value {
	switch {
	case math.IsNaN(f):
		return structpb.NewStringValue("NaN")
	case math.IsInf(f, 1):
		return structpb.NewStringValue("Infinity")
	case math.IsInf(f, -1):
		return structpb.NewStringValue("-Infinity")
	}
	return structpb.NewNumberValue(f)
}

// checkAggregate refuses what an aggregate query cannot combine with.
func checkAggregate(q *pb.Query, tok string) error {
	bad := func(field, what string) error {
		return &apierror.Error{Code: apierror.InvalidArgument, Field: field,
			Msg: "an aggregate query cannot also ask for " + what}
	}
	switch {
	case q.GetCount():
		return bad("query.count", "count (use the count() function)")
	case q.GetKeysOnly():
		return bad("query.keys_only", "keys_only")
	case q.GetVersions():
		return bad("query.versions", "versions")
	case q.GetOrder() != nil:
		return bad("query.order", "an order (rows come ordered by group)")
	case q.GetLimit() != 0:
		return bad("query.limit", "a limit")
	case tok != "":
		return &apierror.Error{Code: apierror.InvalidArgument, Field: "page_token",
			Msg: "invalid page token: an aggregate query is answered in one response"}
	}
	return nil
}

// aggregatePage answers a Query with aggregate: the matches of its filter
// read from one snapshot, in parallel over parts of its key ranges (as
// Scan splits them), each part reading only the named fields of each
// record into its own groups; the parts' groups are then merged. The
// response is bounded like a page (maxBytes) and held of the result
// budget in h.
func (e *Engine) aggregatePage(ctx context.Context, req *pb.QueryRequest, maxBytes int64, h *hold) (*pb.QueryResponse, error) {
	q := req.GetQuery()
	if err := checkAggregate(q, req.GetPageToken()); err != nil {
		e.stats.QueryErrors.Add(1)
		return nil, err
	}
	plain := proto.CloneOf(q)
	plain.Aggregate = nil
	c, err := e.compile(plain)
	if err != nil {
		e.stats.QueryErrors.Add(1)
		return nil, err
	}
	spec, err := compileAggregate(c.t, q.GetAggregate())
	if err != nil {
		e.stats.QueryErrors.Add(1)
		return nil, err
	}
	ix, why := c.t.aggIndexFor(c.plan.Match(), spec)
	if ix != nil {
		return e.aggregateFromIndex(ctx, c, ix, spec, maxBytes, h)
	}
	start := time.Now()
	rd, done, err := e.reader(c)
	if err != nil {
		return nil, err
	}
	defer done()
	par := min(runtime.GOMAXPROCS(0), maxAggregateParallelism)
	if c.plan.Access == query.AccessPKPoint {
		par = 1
	}
	parts := e.split(c.plan, par)
	var read atomic.Uint64
	merged, err := e.aggregateParts(ctx, c, rd, spec, parts, maxBytes, &read)
	e.queryDone("Query", c, start, uint64(len(merged.groups)), read.Load())
	if err != nil {
		return nil, err
	}
	resp := &pb.QueryResponse{}
	if resp.Rows, err = spec.rows(merged); err != nil {
		return nil, err
	}
	if c.q.GetExplain() {
		resp.Plan = explainAggregate(c.plan, spec, len(parts))
		if why != "" {
			resp.Plan.Text += " (" + why + ")"
		}
	}
	return e.aggregateAnswer(ctx, h, resp, maxBytes)
}

// aggregateAnswer returns resp, an aggregation's answer, once it fits
// one response and the result buffer has room for it.
func (e *Engine) aggregateAnswer(ctx context.Context, h *hold, resp *pb.QueryResponse, maxBytes int64) (*pb.QueryResponse, error) {
	size := int64(proto.Size(resp))
	if size > maxBytes {
		return nil, apierror.Errorf(apierror.ResourceExhausted,
			"aggregate: an answer of %d bytes is larger than one response may be (%d bytes; docs/limits.md)", size, maxBytes)
	}
	if err := e.cover(ctx, h, size, true); err != nil {
		return nil, err
	}
	return resp, nil
}

// aggregateParts runs one aggPart per part concurrently and merges them.
func (e *Engine) aggregateParts(parent context.Context, c *compiled, rd store.View, spec *aggSpec, parts [][]query.Range, maxBytes int64, read *atomic.Uint64) (*aggPart, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	limit := e.opts.MaxAggregateGroups
	out := make([]*aggPart, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		out[i] = newAggPart(spec, limit, maxBytes)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ap := out[i]
			cu := &cursor{e: e, c: c, r: rd, onRead: func(n uint64) { read.Add(n) }}
			err := cu.run(ctx, part, nil, func(_, rec []byte) bool { return ap.add(rec) })
			cu.flushStats()
			if err == nil {
				err = ap.err
			}
			if errs[i] = err; err != nil {
				cancel() // the other parts' work is wasted now
			}
		}()
	}
	wg.Wait()
	if err := parent.Err(); err != nil {
		return out[0], err
	}
	// A part's own error first: the others may only have been canceled.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return out[0], err
		}
	}
	into := out[0]
	for _, ap := range out[1:] {
		if err := into.merge(ap); err != nil {
			return into, err
		}
	}
	return into, nil
}

// merge adds the groups of o to p's.
func (p *aggPart) merge(o *aggPart) error {
	for k, g := range o.groups {
		mine := p.groups[k]
		if mine == nil {
			if len(p.groups) >= p.limit {
				return tooManyGroups(p.limit)
			}
			p.groups[k] = g
			continue
		}
		for j := range p.s.funcs {
			mine.accs[j].merge(&p.s.funcs[j], &g.accs[j])
		}
	}
	return nil
}

// rows renders the groups of p ordered by their values. With no group_by
// there is always one row, the aggregate of every match.
func (s *aggSpec) rows(p *aggPart) ([]*pb.AggregateRow, error) {
	groups := make([]*aggGroup, 0, len(p.groups)+1)
	for _, g := range p.groups {
		groups = append(groups, g)
	}
	if len(s.groups) == 0 && len(groups) == 0 {
		groups = append(groups, &aggGroup{accs: make([]aggAcc, len(s.funcs))})
	}
	slices.SortFunc(groups, func(a, b *aggGroup) int {
		for i, f := range s.groups {
			if c := f.compare(a.vals[i], b.vals[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	rows := make([]*pb.AggregateRow, len(groups))
	for r, g := range groups {
		row := &pb.AggregateRow{Group: make([]*structpb.Value, len(s.groups)), Values: make([]*structpb.Value, len(s.funcs))}
		for i, f := range s.groups {
			row.Group[i] = f.value(g.vals[i])
		}
		for j := range s.funcs {
			v, err := g.accs[j].value(j, &s.funcs[j])
			if err != nil {
				return nil, err
			}
			row.Values[j] = v
		}
		rows[r] = row
	}
	return rows, nil
}

// explainAggregate is the plan of an aggregate query: how its records were
// read, then what was computed of them and by how many parts.
func explainAggregate(p *query.Plan, s *aggSpec, parts int) *pb.Plan {
	out := p.Explain()
	out.Parallelism = uint32(parts)
	var b strings.Builder
	b.WriteString(out.Text)
	b.WriteString(" aggregate")
	if len(s.groups) > 0 {
		b.WriteString(" group by ")
		for i, g := range s.groups {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(g.name)
		}
	}
	b.WriteString(":")
	for i, fn := range s.funcs {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(" " + opName(fn.op) + "(")
		if fn.field != nil {
			b.WriteString(fn.field.name)
		}
		b.WriteString(")")
	}
	b.WriteString(" parallel " + strconv.Itoa(parts))
	out.Text = b.String()
	return out
}
