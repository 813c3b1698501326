package client

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Expression helpers build a Query's where tree from Go values:
//
//	q := &pb.Query{Type: "shop.User", Where: client.And(client.Ge("age", 30), client.Prefix("name", "An"))}
//
// is the tree of the text filter `age >= 30 and name prefix "An"` (which
// Query.Filter takes as it is). A value is a Go integer (int64 operands;
// unsigned types give uint64 ones), float, bool, string or []byte, an
// EnumName, a protoreflect.Enum (a generated enum, sent by name) or a
// *pb.Value. Any other value panics, as a programming error: the helpers
// have no error to return.

// EnumName is an enum value operand given by name ("ACTIVE").
type EnumName string

// Eq matches records whose field equals v.
func Eq(field string, v any) *pb.Expr { return cmp(field, pb.Op_OP_EQ, v) }

// Ne matches records whose field differs from v.
func Ne(field string, v any) *pb.Expr { return cmp(field, pb.Op_OP_NE, v) }

// Lt matches records whose field is less than v.
func Lt(field string, v any) *pb.Expr { return cmp(field, pb.Op_OP_LT, v) }

// Le matches records whose field is at most v.
func Le(field string, v any) *pb.Expr { return cmp(field, pb.Op_OP_LE, v) }

// Gt matches records whose field is greater than v.
func Gt(field string, v any) *pb.Expr { return cmp(field, pb.Op_OP_GT, v) }

// Ge matches records whose field is at least v.
func Ge(field string, v any) *pb.Expr { return cmp(field, pb.Op_OP_GE, v) }

// Prefix matches records whose string or bytes field starts with v.
func Prefix(field string, v any) *pb.Expr { return cmp(field, pb.Op_OP_PREFIX, v) }

// Contains matches records whose string or bytes field contains v.
func Contains(field string, v any) *pb.Expr { return cmp(field, pb.Op_OP_CONTAINS, v) }

// In matches records whose field equals one of vs.
func In(field string, vs ...any) *pb.Expr {
	c := &pb.Comparison{Field: field, Op: pb.Op_OP_IN, Values: make([]*pb.Value, len(vs))}
	for i, v := range vs {
		c.Values[i] = Value(v)
	}
	return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: c}}
}

// And matches records that every one of xs matches.
func And(xs ...*pb.Expr) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: xs}}}
}

// Or matches records that at least one of xs matches.
func Or(xs ...*pb.Expr) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_Or{Or: &pb.ExprList{Exprs: xs}}}
}

// Not matches records that x does not match.
func Not(x *pb.Expr) *pb.Expr { return &pb.Expr{Expr: &pb.Expr_Not{Not: x}} }

func cmp(field string, op pb.Op, v any) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: field, Op: op, Value: Value(v)}}}
}

// Value converts a Go value to a typed operand (see the expression
// helpers for the types accepted); any other type panics.
func Value(v any) *pb.Value {
	switch x := v.(type) {
	case *pb.Value:
		return x
	case int:
		return intOperand(int64(x))
	case int8:
		return intOperand(int64(x))
	case int16:
		return intOperand(int64(x))
	case int32:
		return intOperand(int64(x))
	case int64:
		return intOperand(x)
	case uint:
		return uintOperand(uint64(x))
	case uint8:
		return uintOperand(uint64(x))
	case uint16:
		return uintOperand(uint64(x))
	case uint32:
		return uintOperand(uint64(x))
	case uint64:
		return uintOperand(x)
	case float32:
		return &pb.Value{Kind: &pb.Value_Double{Double: float64(x)}}
	case float64:
		return &pb.Value{Kind: &pb.Value_Double{Double: x}}
	case bool:
		return &pb.Value{Kind: &pb.Value_Bool{Bool: x}}
	case string:
		return &pb.Value{Kind: &pb.Value_String_{String_: x}}
	case []byte:
		return &pb.Value{Kind: &pb.Value_Bytes{Bytes: x}}
	case EnumName:
		return &pb.Value{Kind: &pb.Value_Enum{Enum: string(x)}}
	case protoreflect.Enum:
		d := x.Descriptor().Values().ByNumber(x.Number())
		if d == nil {
			return &pb.Value{Kind: &pb.Value_Int{Int: int64(x.Number())}}
		}
		return &pb.Value{Kind: &pb.Value_Enum{Enum: string(d.Name())}}
	}
	panic(fmt.Sprintf("client: %T is not an operand type (want an integer, float, bool, string, []byte, EnumName or enum)", v))
}

func intOperand(n int64) *pb.Value   { return &pb.Value{Kind: &pb.Value_Int{Int: n}} }
func uintOperand(n uint64) *pb.Value { return &pb.Value{Kind: &pb.Value_Uint{Uint: n}} }
