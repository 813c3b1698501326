package query

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/wire"
)

// Point recognises the commonest query of all, one record by its primary
// key ("id = 42"), and encodes its record key without compiling a plan.
//
// Compile validates and plans any expression; for a point lookup that work
// (expression nodes, candidate paths, range sets) costs more than the
// storage read itself, and batched lookups arrive by the million. Key gives
// the same answer Compile would — a pk_point plan with one range, no filter
// — or declines, and the caller compiles: anything unusual (enums, floats,
// composite keys, explain, a value of another type, a value the field cannot
// hold) takes the general path, so its errors and plans stay in one place.
//
// A Point is immutable and safe for concurrent use.
type Point struct {
	prefix []byte // tag and type id of the record key space
	field  string // the primary key's field path
	cls    class
	kind   protoreflect.Kind
}

// NewPoint returns the point-lookup recogniser of t's type, or nil when its
// primary key is not a single field of a kind the fast path encodes.
func NewPoint(t *Target) *Point {
	if t == nil || t.Type == nil || len(t.Type.PrimaryKey) != 1 {
		return nil
	}
	f := t.Type.PrimaryKey[0]
	cls := classOf(f.Kind)
	switch {
	case f.Kind == protoreflect.EnumKind:
		return nil // operands name values; let Compile resolve them
	case cls == clsInt, cls == clsUint, cls == clsBool, cls == clsBytes:
	default:
		return nil
	}
	prefix := keyspace.RecordPrefix(t.Type.ID)
	return &Point{prefix: prefix, field: f.Path, cls: cls, kind: f.Kind}
}

// Key appends to dst the record key q looks up and reports true when q is
// a plain primary-key equality that Compile would plan as one pk_point
// range with no filter. On false, dst is returned unchanged and the caller
// must Compile q. Limit, keys_only and count do not change the access path
// and are left to the caller, which reads them from q. A query with a text
// filter is never a plain lookup here: the caller parses the text first
// (and refuses it beside a where).
func (p *Point) Key(dst []byte, q *pb.Query) ([]byte, bool) {
	if p == nil || q.GetExplain() || q.GetOrder().GetIndex() != "" || q.GetFilter() != "" {
		return dst, false
	}
	c := q.GetWhere().GetCmp()
	if c == nil || c.GetOp() != pb.Op_OP_EQ || c.GetField() != p.field || len(c.GetValues()) != 0 {
		return dst, false
	}
	n := len(dst)
	dst = append(dst, p.prefix...)
	switch v := c.GetValue().GetKind().(type) {
	case *pb.Value_Int:
		if p.cls != clsInt {
			return dst[:n], false
		}
		lo, hi := intDomain(p.kind)
		if v.Int < lo || v.Int > hi {
			return dst[:n], false
		}
		return orderedcode.AppendInt(dst, v.Int), true
	case *pb.Value_Uint:
		if p.cls != clsUint || v.Uint > uintMax(p.kind) {
			return dst[:n], false
		}
		return orderedcode.AppendUint(dst, v.Uint), true
	case *pb.Value_Bool:
		if p.cls != clsBool {
			return dst[:n], false
		}
		return orderedcode.AppendBool(dst, v.Bool), true
	case *pb.Value_String_:
		if p.kind != protoreflect.StringKind {
			return dst[:n], false
		}
		return orderedcode.AppendString(dst, v.String_), true
	case *pb.Value_Bytes:
		if p.kind != protoreflect.BytesKind {
			return dst[:n], false
		}
		return orderedcode.AppendBytes(dst, v.Bytes), true
	}
	return dst[:n], false
}

// KeyWire is Key for a query read straight from its wire bytes: field is
// the comparison's field path, of a comparison with op EQ and no values
// list in a query with no explain, order or filter (the caller checks
// those), and the operand is Value field num with varint x (int, uint,
// bool) or bytes s (string, bytes; a string already valid UTF-8). It
// appends what Key would for the decoded query, or declines as Key would.
func (p *Point) KeyWire(dst, field []byte, num protowire.Number, x uint64, s []byte) ([]byte, bool) {
	if p == nil || string(field) != p.field {
		return dst, false
	}
	n := len(dst)
	dst = append(dst, p.prefix...)
	switch num {
	case wire.ValueInt:
		v := int64(x) //nolint:gosec // int64 travels as its two's-complement varint
		lo, hi := intDomain(p.kind)
		if p.cls != clsInt || v < lo || v > hi {
			return dst[:n], false
		}
		return orderedcode.AppendInt(dst, v), true
	case wire.ValueUint:
		if p.cls != clsUint || x > uintMax(p.kind) {
			return dst[:n], false
		}
		return orderedcode.AppendUint(dst, x), true
	case wire.ValueBool:
		if p.cls != clsBool {
			return dst[:n], false
		}
		return orderedcode.AppendBool(dst, x != 0), true
	case wire.ValueString:
		if p.kind != protoreflect.StringKind {
			return dst[:n], false
		}
		return orderedcode.AppendBytes(dst, s), true // the same bytes as AppendString
	case wire.ValueBytes:
		if p.kind != protoreflect.BytesKind {
			return dst[:n], false
		}
		return orderedcode.AppendBytes(dst, s), true
	}
	return dst[:n], false
}
