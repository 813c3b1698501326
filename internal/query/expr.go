package query

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/record"
)

// class groups field kinds by how their values compare.
type class uint8

const (
	clsInt     class = iota + 1 // signed integers and enums: Scalar.Int
	clsUint                     // unsigned integers: Scalar.Uint
	clsFloat32                  // float: Scalar.Float holds a float32
	clsFloat64                  // double
	clsBool
	clsBytes // string and bytes
)

func classOf(k protoreflect.Kind) class {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind,
		protoreflect.Sint64Kind, protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind,
		protoreflect.EnumKind:
		return clsInt
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind,
		protoreflect.Fixed64Kind:
		return clsUint
	case protoreflect.FloatKind:
		return clsFloat32
	case protoreflect.DoubleKind:
		return clsFloat64
	case protoreflect.BoolKind:
		return clsBool
	case protoreflect.StringKind, protoreflect.BytesKind:
		return clsBytes
	}
	return 0
}

// is32 reports whether k holds 32-bit integers.
func is32(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.EnumKind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return true
	}
	return false
}

// operand is one typed comparison operand; the member matching the
// comparison's class is meaningful.
type operand struct {
	i int64
	u uint64
	f float64
	b bool
	s []byte
}

// nodeOp is the kind of an expression node.
type nodeOp uint8

const (
	nCmp nodeOp = iota + 1
	nAnd
	nOr
	nNot
)

// node is a validated expression.
type node struct {
	op   nodeOp
	kids []*node
	c    *cmpNode
}

// cmpNode is a validated comparison.
type cmpNode struct {
	field    string
	path     *record.Path
	fd       protoreflect.FieldDescriptor
	kind     protoreflect.Kind
	repeated bool // some field on the path is repeated (or a map)
	op       pb.Op
	cls      class
	v        operand   // all ops but IN
	in       []operand // IN operands, as given (for String)

	// IN lookup tables, by class.
	ints   []int64
	uints  []uint64
	floats []float64 // without NaN
	bools  uint8     // bit 0: false, bit 1: true
	strs   map[string]struct{}
}

type compiler struct {
	t        *Target
	lim      Limits
	nodes    int
	inValues int
}

func (c *compiler) expr(e *pb.Expr, depth int) (*node, error) {
	if depth > c.lim.MaxDepth {
		return nil, &Error{Reason: fmt.Sprintf("expression nested deeper than %d levels (limit MaxDepth)", c.lim.MaxDepth)}
	}
	c.nodes++
	if c.nodes > c.lim.MaxNodes {
		return nil, &Error{Reason: fmt.Sprintf("expression has more than %d comparisons and operators (limit MaxNodes)", c.lim.MaxNodes)}
	}
	switch x := e.GetExpr().(type) {
	case *pb.Expr_Cmp:
		cn, err := c.comparison(x.Cmp)
		if err != nil {
			return nil, err
		}
		return &node{op: nCmp, c: cn}, nil
	case *pb.Expr_And:
		return c.list(nAnd, x.And.GetExprs(), depth)
	case *pb.Expr_Or:
		return c.list(nOr, x.Or.GetExprs(), depth)
	case *pb.Expr_Not:
		if x.Not == nil {
			return nil, &Error{Reason: "NOT without an operand"}
		}
		k, err := c.expr(x.Not, depth+1)
		if err != nil {
			return nil, err
		}
		return &node{op: nNot, kids: []*node{k}}, nil
	}
	return nil, &Error{Reason: "empty expression (no comparison, and, or, not)"}
}

func (c *compiler) list(op nodeOp, es []*pb.Expr, depth int) (*node, error) {
	n := &node{op: op, kids: make([]*node, 0, min(len(es), c.lim.MaxNodes))}
	for _, e := range es {
		k, err := c.expr(e, depth+1)
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, k)
	}
	return n, nil
}

func (c *compiler) comparison(cm *pb.Comparison) (*cmpNode, error) {
	if cm == nil {
		return nil, &Error{Reason: "empty comparison"}
	}
	field := cm.GetField()
	fd, repeated, err := c.resolve(field)
	if err != nil {
		return nil, err
	}
	op := cm.GetOp()
	n := &cmpNode{field: field, fd: fd, kind: fd.Kind(), repeated: repeated, op: op, cls: classOf(fd.Kind())}
	switch op {
	case pb.Op_OP_EQ, pb.Op_OP_NE, pb.Op_OP_LT, pb.Op_OP_LE, pb.Op_OP_GT, pb.Op_OP_GE:
	case pb.Op_OP_PREFIX, pb.Op_OP_CONTAINS:
		if n.cls != clsBytes {
			return nil, errorf(field, "operator %s not valid for %s field", opName(op), kindName(fd))
		}
	case pb.Op_OP_IN:
	case pb.Op_OP_UNSPECIFIED:
		return nil, errorf(field, "comparison has no operator")
	default:
		return nil, errorf(field, "unknown operator %d", int32(op))
	}
	if op == pb.Op_OP_IN {
		if cm.GetValue() != nil {
			return nil, errorf(field, "IN takes values, not value")
		}
		if len(cm.GetValues()) == 0 {
			return nil, errorf(field, "IN needs at least one value")
		}
		c.inValues += len(cm.GetValues())
		if c.inValues > c.lim.MaxInValues {
			return nil, errorf(field, "query has more than %d IN values (limit MaxInValues)", c.lim.MaxInValues)
		}
		n.in = make([]operand, len(cm.GetValues()))
		for i, v := range cm.GetValues() {
			if n.in[i], err = c.operand(n, v); err != nil {
				return nil, err
			}
		}
		n.buildIn()
	} else {
		if len(cm.GetValues()) > 0 {
			return nil, errorf(field, "operator %s takes value, not values", opName(op))
		}
		if cm.GetValue() == nil {
			return nil, errorf(field, "operator %s needs a value", opName(op))
		}
		if n.v, err = c.operand(n, cm.GetValue()); err != nil {
			return nil, err
		}
	}
	if n.path, err = c.t.Rec.Path(field); err != nil {
		return nil, errorf(field, "%v", err)
	}
	return n, nil
}

// resolve checks a dotted field path: message fields (singular, repeated
// or maps) up to a scalar, string, bytes or enum field.
func (c *compiler) resolve(path string) (protoreflect.FieldDescriptor, bool, error) {
	if path == "" {
		return nil, false, &Error{Reason: "comparison has no field"}
	}
	md := c.t.Type.Desc
	if md == nil {
		md = c.t.Rec.Descriptor()
	}
	var fd protoreflect.FieldDescriptor
	repeated := false
	start := 0
	for i := 0; i <= len(path); i++ {
		if i < len(path) && path[i] != '.' {
			continue
		}
		name := path[start:i]
		if md == nil {
			return nil, false, errorf(path, "field %q is a %s, not a message, so it has no field %q", fd.Name(), fd.Kind(), name)
		}
		if name == "" {
			return nil, false, errorf(path, "empty segment in field path")
		}
		fd = md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return nil, false, errorf(path, "no field %q in %s", name, md.FullName())
		}
		if fd.Cardinality() == protoreflect.Repeated {
			repeated = true
		}
		md = fd.Message()
		start = i + 1
	}
	if md != nil {
		return nil, false, errorf(path, "field %q is a message (%s); compare one of its fields", fd.Name(), md.FullName())
	}
	return fd, repeated, nil
}

// operand types a Value for the comparison's field.
func (c *compiler) operand(n *cmpNode, v *pb.Value) (operand, error) {
	var o operand
	if v == nil {
		return o, errorf(n.field, "missing value")
	}
	switch n.cls {
	case clsInt:
		return intOperand(n, v)
	case clsUint:
		switch x := v.GetKind().(type) {
		case *pb.Value_Uint:
			o.u = x.Uint
		case *pb.Value_Int:
			if x.Int < 0 {
				return o, errorf(n.field, "negative value for unsigned field")
			}
			o.u = uint64(x.Int)
		default:
			return o, mismatch(n, valueName(v))
		}
	case clsFloat32, clsFloat64:
		return floatOperand(n, v)
	case clsBool:
		x, ok := v.GetKind().(*pb.Value_Bool)
		if !ok {
			return o, mismatch(n, valueName(v))
		}
		o.b = x.Bool
	case clsBytes:
		return bytesOperand(n, v)
	default:
		return o, errorf(n.field, "cannot compare %s field", kindName(n.fd))
	}
	return o, nil
}

// mismatch is the error of an operand of another type than n's field.
func mismatch(n *cmpNode, what string) error {
	return errorf(n.field, "type mismatch: %s field compared with %s", kindName(n.fd), what)
}

func intOperand(n *cmpNode, v *pb.Value) (operand, error) {
	var o operand
	fd := n.fd
	switch x := v.GetKind().(type) {
	case *pb.Value_Int:
		o.i = x.Int
	case *pb.Value_Uint:
		if x.Uint > math.MaxInt64 {
			return o, errorf(n.field, "value %d out of range for %s field", x.Uint, kindName(fd))
		}
		o.i = int64(x.Uint)
	case *pb.Value_Enum:
		if fd.Kind() != protoreflect.EnumKind {
			return o, mismatch(n, "enum")
		}
		ev := fd.Enum().Values().ByName(protoreflect.Name(x.Enum))
		if ev == nil {
			return o, errorf(n.field, "no value %q in enum %s", x.Enum, fd.Enum().FullName())
		}
		o.i = int64(ev.Number())
	default:
		return o, mismatch(n, valueName(v))
	}
	return o, nil
}

func floatOperand(n *cmpNode, v *pb.Value) (operand, error) {
	var o operand
	switch x := v.GetKind().(type) {
	case *pb.Value_Double:
		o.f = x.Double
	case *pb.Value_Int:
		o.f = float64(x.Int)
	case *pb.Value_Uint:
		o.f = float64(x.Uint)
	default:
		return o, mismatch(n, valueName(v))
	}
	if n.cls == clsFloat32 && math.Abs(o.f) <= math.MaxFloat32 {
		// A float field holds float32 values: compare with the operand
		// rounded the way the field would store it, so `ratio = 0.1`
		// finds the 0.1 a client wrote. Operands beyond float32 range
		// stay exact (every finite float32 is below them).
		o.f = float64(float32(o.f))
	}
	return o, nil
}

func bytesOperand(n *cmpNode, v *pb.Value) (operand, error) {
	var o operand
	switch x := v.GetKind().(type) {
	case *pb.Value_String_:
		o.s = []byte(x.String_)
	case *pb.Value_Bytes:
		if n.fd.Kind() != protoreflect.BytesKind {
			return o, mismatch(n, "bytes")
		}
		o.s = x.Bytes
		if o.s == nil {
			o.s = []byte{}
		}
	case *pb.Value_Enum:
		// An unquoted word (name = Ann) reads as an enum value name; what
		// was meant is almost always the string.
		return o, errorf(n.field, "%s field compared with the unquoted word %s (an enum value name): quote a string, as in %s = %q",
			kindName(n.fd), x.Enum, n.field, x.Enum)
	default:
		return o, mismatch(n, valueName(v))
	}
	return o, nil
}

// buildIn fills the IN lookup table of the comparison's class.
func (n *cmpNode) buildIn() {
	switch n.cls {
	case clsInt:
		for _, o := range n.in {
			n.ints = append(n.ints, o.i)
		}
		slices.Sort(n.ints)
		n.ints = slices.Compact(n.ints)
	case clsUint:
		for _, o := range n.in {
			n.uints = append(n.uints, o.u)
		}
		slices.Sort(n.uints)
		n.uints = slices.Compact(n.uints)
	case clsFloat32, clsFloat64:
		for _, o := range n.in {
			if o.f == o.f {
				n.floats = append(n.floats, o.f)
			}
		}
		slices.SortFunc(n.floats, cmp.Compare[float64])
	case clsBool:
		for _, o := range n.in {
			if o.b {
				n.bools |= 2
			} else {
				n.bools |= 1
			}
		}
	case clsBytes:
		n.strs = make(map[string]struct{}, len(n.in))
		for _, o := range n.in {
			n.strs[string(o.s)] = struct{}{}
		}
	}
}

// kindName names a field's type as the schema spells it.
func kindName(fd protoreflect.FieldDescriptor) string {
	if fd.IsMap() {
		return "map"
	}
	return fd.Kind().String()
}

func valueName(v *pb.Value) string {
	switch v.GetKind().(type) {
	case *pb.Value_Int:
		return "int"
	case *pb.Value_Uint:
		return "uint"
	case *pb.Value_Double:
		return "double"
	case *pb.Value_Bool:
		return "bool"
	case *pb.Value_String_:
		return "string"
	case *pb.Value_Bytes:
		return "bytes"
	case *pb.Value_Enum:
		return "enum"
	}
	return "an empty value"
}

func opName(op pb.Op) string {
	switch op {
	case pb.Op_OP_EQ:
		return "="
	case pb.Op_OP_NE:
		return "!="
	case pb.Op_OP_LT:
		return "<"
	case pb.Op_OP_LE:
		return "<="
	case pb.Op_OP_GT:
		return ">"
	case pb.Op_OP_GE:
		return ">="
	case pb.Op_OP_IN:
		return "IN"
	case pb.Op_OP_PREFIX:
		return "PREFIX"
	case pb.Op_OP_CONTAINS:
		return "CONTAINS"
	}
	return "OP(" + fmt.Sprint(int32(op)) + ")"
}
