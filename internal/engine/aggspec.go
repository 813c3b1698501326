package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/record"
)

// DefaultMaxAggregateGroups is the number of groups an aggregate query may
// produce when Options.MaxAggregateGroups is not set (docs/limits.md).
const DefaultMaxAggregateGroups = 100_000

// maxAggregateFields bounds the group_by fields and functions of one
// aggregate: each costs a field read per record.
const maxAggregateFields = 32

// valClass is how an aggregated field's values compare and add up.
type valClass uint8

const (
	vInt valClass = iota
	vUint
	vFloat
	vBool
	vBytes
	vTime
)

// aggField reads one field of the records being aggregated from their
// bytes: a compiled path (two for a timestamp, its seconds and nanos), and
// no decoding of the rest of the record.
type aggField struct {
	name     string // the path as the request spelt it
	path     *record.Path
	fd       protoreflect.FieldDescriptor
	cls      valClass
	presence bool // an unset field is absent, not its default
	// A google.protobuf.Timestamp: its seconds and nanos, and the
	// top-level number that tells whether it is set.
	sec, nanos *record.Path
	num        []protowire.Number
	// slot is the field's place in aggSpec.w, -1 when the walk does not
	// serve it (see keyExtractor.slot); kind is fd.Kind() and unset the
	// value of an absent field, for the walk.
	slot  int
	kind  protoreflect.Kind
	unset aggVal
}

// aggVal is one value read: i for signed integers, enums, bools (0/1) and
// a timestamp's seconds, u for unsigned, f for floats, b for strings and
// bytes (aliasing the record until copied), n for a timestamp's nanos.
type aggVal struct {
	ok bool // false: the field is absent
	i  int64
	u  uint64
	f  float64
	b  []byte
	n  int32
}

// aggFunc is one compiled AggregateFunction.
type aggFunc struct {
	op    pb.AggregateOp
	field *aggField // nil for count()
	at    int       // field's position in aggSpec.fields
	how   uint8     // how aggPart.accumulate takes its value (see prepare)
}

// aggSpec is a compiled Aggregate.
type aggSpec struct {
	groups []*aggField
	funcs  []aggFunc
	// fields are the distinct fields of groups and funcs, each read once
	// per record; groupAt[i] is where groups[i] is among them.
	fields  []*aggField
	groupAt []int
	// w walks a record's top-level fields once to read every field it
	// serves, so that a record with several aggregated fields is not
	// read once per field; nil when it serves none.
	w *aggWalk
}

// use notes f among the fields read and returns its position.
func (s *aggSpec) use(f *aggField) int {
	for i, g := range s.fields {
		if g.name == f.name {
			return i
		}
	}
	s.fields = append(s.fields, f)
	return len(s.fields) - 1
}

// compileAggregate checks a against the record type and compiles it. Every
// error names the request field at fault.
func compileAggregate(t *recType, a *pb.Aggregate) (*aggSpec, error) {
	if len(a.GetFunctions()) == 0 {
		return nil, &apierror.Error{Code: apierror.InvalidArgument, Field: "query.aggregate.functions",
			Msg: "aggregate: name at least one function (count, sum, min, max, avg)"}
	}
	if n := len(a.GetGroupBy()) + len(a.GetFunctions()); n > maxAggregateFields {
		return nil, &apierror.Error{Code: apierror.InvalidArgument, Field: "query.aggregate",
			Msg: fmt.Sprintf("aggregate: %d group_by fields and functions is over the limit of %d", n, maxAggregateFields)}
	}
	s := &aggSpec{}
	for i, name := range a.GetGroupBy() {
		where := "query.aggregate.group_by[" + strconv.Itoa(i) + "]"
		f, err := aggFieldOf(t, name, where, false)
		if err != nil {
			return nil, err
		}
		s.groups = append(s.groups, f)
		s.groupAt = append(s.groupAt, s.use(f))
	}
	for i, fn := range a.GetFunctions() {
		where := "query.aggregate.functions[" + strconv.Itoa(i) + "].field"
		af := aggFunc{op: fn.GetOp()}
		switch fn.GetOp() {
		case pb.AggregateOp_AGGREGATE_OP_COUNT, pb.AggregateOp_AGGREGATE_OP_SUM, pb.AggregateOp_AGGREGATE_OP_AVG,
			pb.AggregateOp_AGGREGATE_OP_MIN, pb.AggregateOp_AGGREGATE_OP_MAX:
		default:
			return nil, &apierror.Error{Code: apierror.InvalidArgument, Field: "query.aggregate.functions[" + strconv.Itoa(i) + "].op",
				Msg: "aggregate: function " + strconv.Itoa(i) + " has no operation (count, sum, min, max, avg)"}
		}
		if fn.GetField() == "" {
			if fn.GetOp() != pb.AggregateOp_AGGREGATE_OP_COUNT {
				return nil, &apierror.Error{Code: apierror.InvalidArgument, Field: where,
					Msg: "aggregate: " + opName(fn.GetOp()) + " needs a field"}
			}
			s.funcs = append(s.funcs, af)
			continue
		}
		ordered := fn.GetOp() == pb.AggregateOp_AGGREGATE_OP_MIN || fn.GetOp() == pb.AggregateOp_AGGREGATE_OP_MAX
		f, err := aggFieldOf(t, fn.GetField(), where, ordered || fn.GetOp() == pb.AggregateOp_AGGREGATE_OP_COUNT)
		if err != nil {
			return nil, err
		}
		numeric := f.cls == vInt || f.cls == vUint || f.cls == vFloat
		if (fn.GetOp() == pb.AggregateOp_AGGREGATE_OP_SUM || fn.GetOp() == pb.AggregateOp_AGGREGATE_OP_AVG) &&
			(!numeric || f.fd.Kind() == protoreflect.EnumKind) {
			return nil, &apierror.Error{Code: apierror.InvalidArgument, Field: where,
				Msg: fmt.Sprintf("aggregate: %s(%s): field %s is a %s, not a number", opName(fn.GetOp()), f.name, f.name, kindName(f.fd))}
		}
		af.field, af.at = f, s.use(f)
		s.funcs = append(s.funcs, af)
	}
	s.prepare()
	return s, nil
}

// aggFieldOf compiles the field path name of t; timestamps are allowed
// (top-level ones) when ts is set.
func aggFieldOf(t *recType, name, where string, ts bool) (*aggField, error) {
	bad := func(why string) error {
		return &apierror.Error{Code: apierror.InvalidArgument, Field: where, Msg: "aggregate: field " + strconv.Quote(name) + ": " + why}
	}
	p, err := t.rec.Path(name)
	if err != nil {
		return nil, bad(trimRecord(err.Error()))
	}
	fd := p.Field()
	f := &aggField{name: name, path: p, fd: fd, presence: fd.HasPresence()}
	if fd.IsList() || fd.IsMap() {
		return nil, bad("it is repeated; aggregates read singular fields")
	}
	if md := fd.Message(); md != nil {
		if md.FullName() != "google.protobuf.Timestamp" || !ts {
			return nil, bad("it is a message (" + string(md.FullName()) + "); only min, max and count read a google.protobuf.Timestamp")
		}
		if len(p.Numbers()) != 1 {
			return nil, bad("a timestamp must be a top-level field")
		}
		f.cls, f.num = vTime, p.Numbers()
		f.sec, _ = t.rec.Path(name + ".seconds")
		f.nanos, _ = t.rec.Path(name + ".nanos")
		return f, nil
	}
	if _, _, err := p.Get(nil); err != nil {
		return nil, bad("it lies within a repeated field; aggregates read singular fields")
	}
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind, protoreflect.EnumKind:
		f.cls = vInt
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		f.cls = vUint
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f.cls = vFloat
	case protoreflect.BoolKind:
		f.cls = vBool
	default:
		f.cls = vBytes
	}
	return f, nil
}

// trimRecord drops the "record: " of internal/record's messages.
func trimRecord(s string) string {
	const p = "record: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

func kindName(fd protoreflect.FieldDescriptor) string {
	if md := fd.Message(); md != nil {
		return string(md.FullName())
	}
	return fd.Kind().String()
}

func opName(op pb.AggregateOp) string {
	switch op {
	case pb.AggregateOp_AGGREGATE_OP_COUNT:
		return "count"
	case pb.AggregateOp_AGGREGATE_OP_SUM:
		return "sum"
	case pb.AggregateOp_AGGREGATE_OP_MIN:
		return "min"
	case pb.AggregateOp_AGGREGATE_OP_MAX:
		return "max"
	case pb.AggregateOp_AGGREGATE_OP_AVG:
		return "avg"
	}
	return op.String()
}

// read reads f from rec; scratch is a buffer for a timestamp's presence.
func (f *aggField) read(rec []byte, scratch *[]byte) (aggVal, error) {
	if f.cls == vTime {
		*scratch = record.AppendFields((*scratch)[:0], rec, f.num)
		if len(*scratch) == 0 {
			return aggVal{}, nil
		}
		s, _, err := f.sec.Get(rec)
		if err != nil {
			return aggVal{}, err
		}
		n, _, err := f.nanos.Get(rec)
		return aggVal{ok: true, i: s.Int, n: int32(n.Int)}, err
	}
	s, found, err := f.path.Get(rec)
	if err != nil {
		return aggVal{}, err
	}
	if !found && f.presence {
		return aggVal{}, nil
	}
	v := aggVal{ok: true, i: s.Int, u: s.Uint, f: s.Float, b: s.Bytes}
	if f.cls == vBool && s.Bool {
		v.i = 1
	}
	return v, nil
}

// appendKey appends v's encoding to a group key: distinct values, distinct
// encodings, and the length of a string or bytes first, so that the fields
// of a key cannot run into each other.
func (f *aggField) appendKey(dst []byte, v aggVal) []byte {
	if !v.ok {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	switch f.cls {
	case vInt, vBool:
		return binary.BigEndian.AppendUint64(dst, uint64(v.i))
	case vUint:
		return binary.BigEndian.AppendUint64(dst, v.u)
	case vFloat:
		x := v.f
		switch {
		case x == 0:
			x = 0 // -0 and 0 are one group, as they compare equal
		case x != x:
			x = math.NaN() // every NaN is one group
		}
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(x))
	case vTime:
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(dst, uint64(v.i)), uint32(v.n))
	}
	dst = binary.AppendUvarint(dst, uint64(len(v.b)))
	return append(dst, v.b...)
}

// compare orders two values of f: absent first, then ascending (NaN
// before every other double).
func (f *aggField) compare(a, b aggVal) int {
	if !a.ok || !b.ok {
		return cmpBool(a.ok, b.ok)
	}
	switch f.cls {
	case vInt, vBool:
		return cmp.Compare(a.i, b.i)
	case vUint:
		return cmp.Compare(a.u, b.u)
	case vFloat:
		return cmp.Compare(a.f, b.f)
	case vTime:
		if c := cmp.Compare(a.i, b.i); c != 0 {
			return c
		}
		return cmp.Compare(a.n, b.n)
	}
	return bytes.Compare(a.b, b.b)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
