// Package query turns a protobase.v1.Query into an executable plan: it
// validates the expression tree against the record type, chooses an access
// path (primary-key points or ranges, a secondary index range, or a full
// scan) from the comparisons, and compiles the rest of the predicate into a
// Filter that evaluates on raw record bytes without decoding them.
//
// The package is pure: it reads no storage. The engine iterates the key
// ranges of a Plan on a snapshot, and applies Plan.Filter to every record it
// reads.
package query

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/schema"
)

// Limits bound the size of a query. Zero (or negative) fields take their
// defaults.
type Limits struct {
	// MaxDepth bounds the nesting of expressions; a lone comparison has
	// depth 1. Default 32.
	MaxDepth int
	// MaxNodes bounds the number of comparisons and operators (AND, OR,
	// NOT). Default 1000.
	MaxNodes int
	// MaxInValues bounds the number of IN operands, summed over the whole
	// query. Default 10000.
	MaxInValues int
	// MaxRanges bounds the number of key ranges a plan reads; a plan that
	// would need more reads fewer, wider ranges instead. Default 1000.
	MaxRanges int
}

// Defaults of Limits.
const (
	DefaultMaxDepth    = 32
	DefaultMaxNodes    = 1000
	DefaultMaxInValues = 10000
	DefaultMaxRanges   = 1000
)

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultMaxNodes
	}
	if l.MaxInValues <= 0 {
		l.MaxInValues = DefaultMaxInValues
	}
	if l.MaxRanges <= 0 {
		l.MaxRanges = DefaultMaxRanges
	}
	return l
}

// Target describes one record type for planning.
type Target struct {
	// Rec reads fields of the type's records.
	Rec *record.Type
	// Type gives the primary key, the type id and the declared indexes.
	Type *schema.RecordType
	// Indexes are the indexes reads may use: READY ones only. An index of
	// Type missing here is never chosen, and ordering by it is refused.
	Indexes []*schema.Index
}

// Error is a validation error of a query (INVALID_ARGUMENT). Field is the
// field path to blame, if any.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return "field " + e.Field + ": " + e.Reason
}

func errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Access is the way a plan reads the store.
type Access int

const (
	// AccessFullScan reads every record of the type, in primary-key order.
	AccessFullScan Access = iota
	// AccessPKPoint reads records by complete primary keys: each Range
	// starts at an exact record key (End is PrefixEnd(Start)), so a point
	// read of Range.Start is enough.
	AccessPKPoint
	// AccessPKRange reads ranges of record keys.
	AccessPKRange
	// AccessIndexRange reads ranges of index entries; PKFromIndexEntry
	// gives the primary key of each entry and RecordKey its record key.
	AccessIndexRange
)

// String returns the name Explain uses: "full_scan", "pk_point",
// "pk_range" or "index_range".
func (a Access) String() string {
	switch a {
	case AccessFullScan:
		return "full_scan"
	case AccessPKPoint:
		return "pk_point"
	case AccessPKRange:
		return "pk_range"
	case AccessIndexRange:
		return "index_range"
	}
	return "Access(" + strconv.Itoa(int(a)) + ")"
}

// Range is a range [Start, End) of full store keys (tag, id and key). End
// nil would mean the end of the key space, but Compile always fills it.
type Range struct {
	Start, End []byte
}

// Plan is a compiled query.
//
// The engine reads Ranges in order (in reverse order, each range from its
// end backwards, when Reverse is set); the ranges are sorted, disjoint and
// inside the key space of the access path, so the records come out in key
// order (primary key, or index key then primary key). Every record read must
// pass Filter (when not nil) to be a result. No range means no result.
type Plan struct {
	Access Access
	// Index is the index read by AccessIndexRange.
	Index *schema.Index
	// Ranges are the key ranges to read.
	Ranges  []Range
	Reverse bool
	// Filter is the residual predicate: the part of the query's expression
	// the ranges do not already guarantee; nil when they guarantee it all.
	Filter *Filter
	Limit  uint64
	// KeysOnly and Count are copied from the query.
	KeysOnly, Count bool
	// Repeats says that a record may have entries in more than one of
	// Ranges (or more than one in a range): Index names a repeated field,
	// which has an entry per element. The reader then returns each record
	// once. A single range that pins the element holds one entry per
	// record at most.
	Repeats bool

	typeID  uint32
	ixKinds []orderedcode.Kind // key kinds of Index's fields
	// fullFilter is the whole expression (nil when the query has none).
	fullFilter *Filter
}

// Match is the query's whole expression as a predicate on one record, the
// part the ranges guarantee included (nil when the query has none): for
// callers that test records that did not come from Ranges (the change
// feed).
func (p *Plan) Match() *Filter { return p.fullFilter }

// Explain describes the plan for Query.explain.
func (p *Plan) Explain() *pb.Plan {
	out := &pb.Plan{Access: p.Access.String(), Ranges: uint64(len(p.Ranges))}
	var b strings.Builder
	b.WriteString(out.Access)
	if p.Access == AccessIndexRange && p.Index != nil {
		out.Index = p.Index.Name
		b.WriteString(" " + p.Index.Name)
	}
	b.WriteString(" [" + strconv.Itoa(len(p.Ranges)) + " range")
	if len(p.Ranges) != 1 {
		b.WriteString("s")
	}
	b.WriteString("]")
	if p.Reverse {
		b.WriteString(" reverse")
	}
	if p.Count {
		b.WriteString(" count")
	}
	if p.KeysOnly {
		b.WriteString(" keys_only")
	}
	if p.Limit > 0 {
		b.WriteString(" limit " + strconv.FormatUint(p.Limit, 10))
	}
	if p.Filter != nil {
		out.Filter = p.Filter.String()
		b.WriteString(" filter: " + out.Filter)
	}
	out.Text = b.String()
	return out
}

// errNoIndex is returned by PKFromIndexEntry on a plan that reads no index.
var errNoIndex = errors.New("query: plan does not read an index")

// PKFromIndexEntry returns the primary-key encoding (the record key without
// its tag and type id) of an index entry read from Ranges: the value of a
// unique index entry, the key suffix after the index key of a non-unique
// one. The result aliases key or value.
func (p *Plan) PKFromIndexEntry(key, value []byte) ([]byte, error) {
	if p.Access != AccessIndexRange || p.Index == nil {
		return nil, errNoIndex
	}
	if p.Index.Unique {
		return value, nil
	}
	pk, err := keyspace.IndexEntryPK(key, p.Index.ID, p.ixKinds)
	if errors.Is(err, keyspace.ErrForeignKey) {
		return nil, fmt.Errorf("query: key % x is not an entry of index %s", key, p.Index.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("query: index %s entry: %w", p.Index.Name, err)
	}
	return pk, nil
}

// RecordKey appends to dst the record key (tag, type id, pk) of the primary
// key encoding pk, as PKFromIndexEntry returns it.
func (p *Plan) RecordKey(dst, pk []byte) []byte {
	return keyspace.AppendRecordKey(dst, p.typeID, pk)
}

// Compile validates q against t and plans it. Validation errors are *Error.
func Compile(q *pb.Query, t *Target, lim Limits) (*Plan, error) {
	if q == nil {
		return nil, &Error{Reason: "no query"}
	}
	if t == nil || t.Rec == nil || t.Type == nil {
		return nil, errors.New("query: incomplete target")
	}
	lim = lim.withDefaults()
	c := compiler{t: t, lim: lim}
	var root *node
	if q.GetWhere() != nil {
		var err error
		if root, err = c.expr(q.GetWhere(), 1); err != nil {
			return nil, err
		}
	}

	p := &Plan{
		Limit:    q.GetLimit(),
		KeysOnly: q.GetKeysOnly(),
		Count:    q.GetCount(),
		typeID:   t.Type.ID,
	}
	if root != nil {
		p.fullFilter = &Filter{root: root}
	}

	cands, err := candidates(t, q.GetOrder())
	if err != nil {
		return nil, err
	}
	if o := q.GetOrder(); o != nil && o.GetDescending() {
		p.Reverse = true
	}
	pl := planner{maxRanges: lim.MaxRanges}
	ch := pl.plan(root, cands)
	if ch.cand == nil {
		return nil, sparseOrder(cands[0])
	}

	cand := ch.cand
	switch {
	case cand.index != nil:
		p.Access = AccessIndexRange
		p.Index = cand.index
		p.ixKinds = keyKinds(cand.fields)
		if r := cand.index.RepeatedField(); r >= 0 {
			p.Repeats = len(ch.ranges) > 1 || ch.eq <= r
		}
	case ch.point:
		p.Access = AccessPKPoint
	case ch.constrained:
		p.Access = AccessPKRange
	default:
		p.Access = AccessFullScan
	}
	p.Ranges = ch.ranges
	if ch.residual != nil {
		p.Filter = &Filter{root: ch.residual}
	}
	return p, nil
}

// candidate is one access path: the primary key or a secondary index.
type candidate struct {
	index  *schema.Index // nil for the primary key
	name   string
	unique bool
	tag    byte
	id     uint32
	fields []schema.KeyField
}

func (c *candidate) isPK() bool { return c.index == nil }

// prefix is the tag and id that start every key of the candidate.
func (c *candidate) prefix() []byte {
	if c.tag == keyspace.TagIndex {
		return keyspace.AppendIndexPrefix(make([]byte, 0, 16), c.id)
	}
	return keyspace.AppendRecordPrefix(make([]byte, 0, 16), c.id)
}

// candidates lists the access paths the order allows, the primary key
// first.
func candidates(t *Target, o *pb.Order) ([]*candidate, error) {
	n := 1
	if o == nil {
		n += len(t.Indexes)
	}
	all := make([]candidate, 1, n)
	all[0] = candidate{name: "primary key", unique: true, tag: keyspace.TagRecord, id: t.Type.ID, fields: t.Type.PrimaryKey}
	if o == nil || o.GetIndex() != "" {
		for _, ix := range t.Indexes {
			if ix == nil || (o != nil && o.GetIndex() != ix.Name) {
				continue
			}
			all = append(all, candidate{index: ix, name: ix.Name, unique: ix.Unique, tag: keyspace.TagIndex, id: ix.ID, fields: ix.Fields})
		}
	}
	if o != nil && o.GetIndex() != "" {
		if len(all) == 1 {
			name := o.GetIndex()
			if ix, ok := t.Type.Index(name); ok && ix.Aggregate {
				return nil, &Error{Reason: fmt.Sprintf("order: index %q of %s is an aggregate index, which holds groups, not records", name, t.Type.Name)}
			} else if ok {
				return nil, &Error{Reason: fmt.Sprintf("order: index %q of %s is not ready (%s)", name, t.Type.Name, schema.StateName(ix.State))}
			}
			return nil, &Error{Reason: fmt.Sprintf("order: no index %q on %s", name, t.Type.Name)}
		}
		all = all[1:2]
	}
	out := make([]*candidate, len(all))
	for i := range all {
		out[i] = &all[i]
	}
	return out, nil
}

func keyKinds(fields []schema.KeyField) []orderedcode.Kind {
	out := make([]orderedcode.Kind, len(fields))
	for i, f := range fields {
		out[i] = f.KeyKind()
	}
	return out
}
