package query

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/testschema"
)

// usersProto is the test schema: shop.User has a composite primary key and
// indexes of every key kind; shop.Doc has a one-field key.
const usersProto = testschema.ShopAllKeys

var (
	fixtureOnce sync.Once
	fixtureErr  error
	userTarget  *Target
	docTarget   *Target
)

// targets compiles the test schema once. Every index of User is READY but
// "building", which is left out of the usable indexes.
func targets(tb testing.TB) (user, doc *Target) {
	tb.Helper()
	fixtureOnce.Do(func() {
		res, err := schema.Plan(context.Background(), schema.Empty(), schema.PlanRequest{Files: map[string]string{"users.proto": usersProto}}, nil)
		if err != nil {
			fixtureErr = err
			return
		}
		st := res.State.WithIndexState("shop.User", "building", pb.IndexState_INDEX_STATE_BUILDING, "")
		mk := func(name protoreflect.FullName) *Target {
			rt := st.Types[name]
			rec, err := record.Compile(rt.Desc)
			if err != nil {
				fixtureErr = err
				return nil
			}
			t := &Target{Rec: rec, Type: rt}
			for _, ix := range rt.Indexes {
				if ix.State == pb.IndexState_INDEX_STATE_READY {
					t.Indexes = append(t.Indexes, ix)
				}
			}
			return t
		}
		userTarget, docTarget = mk("shop.User"), mk("shop.Doc")
	})
	if fixtureErr != nil {
		tb.Fatal(fixtureErr)
	}
	return userTarget, docTarget
}

// Expression builders.

func cmpE(field string, op pb.Op, v *pb.Value) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: field, Op: op, Value: v}}}
}
func eq(f string, v *pb.Value) *pb.Expr  { return cmpE(f, pb.Op_OP_EQ, v) }
func ne(f string, v *pb.Value) *pb.Expr  { return cmpE(f, pb.Op_OP_NE, v) }
func lt(f string, v *pb.Value) *pb.Expr  { return cmpE(f, pb.Op_OP_LT, v) }
func le(f string, v *pb.Value) *pb.Expr  { return cmpE(f, pb.Op_OP_LE, v) }
func gt(f string, v *pb.Value) *pb.Expr  { return cmpE(f, pb.Op_OP_GT, v) }
func ge(f string, v *pb.Value) *pb.Expr  { return cmpE(f, pb.Op_OP_GE, v) }
func pre(f string, v *pb.Value) *pb.Expr { return cmpE(f, pb.Op_OP_PREFIX, v) }
func has(f string, v *pb.Value) *pb.Expr { return cmpE(f, pb.Op_OP_CONTAINS, v) }
func in(f string, vs ...*pb.Value) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: f, Op: pb.Op_OP_IN, Values: vs}}}
}
func and(es ...*pb.Expr) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: es}}}
}
func or(es ...*pb.Expr) *pb.Expr {
	return &pb.Expr{Expr: &pb.Expr_Or{Or: &pb.ExprList{Exprs: es}}}
}
func not(e *pb.Expr) *pb.Expr { return &pb.Expr{Expr: &pb.Expr_Not{Not: e}} }

func vi(v int64) *pb.Value     { return &pb.Value{Kind: &pb.Value_Int{Int: v}} }
func vu(v uint64) *pb.Value    { return &pb.Value{Kind: &pb.Value_Uint{Uint: v}} }
func vd(v float64) *pb.Value   { return &pb.Value{Kind: &pb.Value_Double{Double: v}} }
func vb(v bool) *pb.Value      { return &pb.Value{Kind: &pb.Value_Bool{Bool: v}} }
func vs(v string) *pb.Value    { return &pb.Value{Kind: &pb.Value_String_{String_: v}} }
func vby(v []byte) *pb.Value   { return &pb.Value{Kind: &pb.Value_Bytes{Bytes: v}} }
func venum(v string) *pb.Value { return &pb.Value{Kind: &pb.Value_Enum{Enum: v}} }

// newUser returns an empty shop.User message.
func newUser(t *Target) *dynamicpb.Message { return dynamicpb.NewMessage(t.Type.Desc) }

func set(m protoreflect.Message, path string, v protoreflect.Value) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m.Mutable(m.Descriptor().Fields().ByName(protoreflect.Name(p))).Message()
	}
	m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(parts[len(parts)-1])), v)
}

func marshal(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// keyOf builds the store key of a record for candidate c exactly as the
// storage layout says: 01 typeID pk; 02 indexID ixkey pk (non-unique);
// 02 indexID ixkey (unique).
func keyOf(t *Target, ix *schema.Index, m protoreflect.Message) (key, value []byte) {
	pk := appendFields(nil, t.Type.PrimaryKey, m)
	if ix == nil {
		key = binary.BigEndian.AppendUint32([]byte{keyspace.TagRecord}, t.Type.ID)
		return append(key, pk...), nil
	}
	key = binary.BigEndian.AppendUint32([]byte{keyspace.TagIndex}, ix.ID)
	key = appendFields(key, ix.Fields, m)
	if ix.Unique {
		return key, pk
	}
	return append(key, pk...), nil
}

func appendFields(dst []byte, fields []schema.KeyField, m protoreflect.Message) []byte {
	for _, kf := range fields {
		cur := m
		for _, fd := range kf.Fields[:len(kf.Fields)-1] {
			cur = cur.Get(fd).Message()
		}
		fd := kf.Fields[len(kf.Fields)-1]
		v := cur.Get(fd)
		switch fd.Kind() {
		case protoreflect.EnumKind:
			dst = orderedcode.AppendInt(dst, int64(v.Enum()))
		case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind,
			protoreflect.Sint64Kind, protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
			dst = orderedcode.AppendInt(dst, v.Int())
		case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
			dst = orderedcode.AppendUint(dst, v.Uint())
		case protoreflect.BoolKind:
			dst = orderedcode.AppendBool(dst, v.Bool())
		case protoreflect.FloatKind:
			dst = orderedcode.AppendFloat32(dst, float32(v.Float()))
		case protoreflect.DoubleKind:
			dst = orderedcode.AppendFloat64(dst, v.Float())
		case protoreflect.StringKind:
			dst = orderedcode.AppendBytes(dst, []byte(v.String()))
		case protoreflect.BytesKind:
			dst = orderedcode.AppendBytes(dst, v.Bytes())
		default:
			panic("kind " + fd.Kind().String())
		}
	}
	return dst
}

// inRanges reports whether key is in one of rs.
func inRanges(rs []Range, key []byte) bool {
	for _, r := range rs {
		if bytes.Compare(key, r.Start) >= 0 && (r.End == nil || bytes.Compare(key, r.End) < 0) {
			return true
		}
	}
	return false
}

// checkRanges checks that rs are sorted, disjoint, non-empty and inside
// the key space of the plan's access path.
func checkRanges(tb testing.TB, p *Plan, t *Target) {
	tb.Helper()
	prefix := binary.BigEndian.AppendUint32([]byte{keyspace.TagRecord}, t.Type.ID)
	if p.Access == AccessIndexRange {
		prefix = binary.BigEndian.AppendUint32([]byte{keyspace.TagIndex}, p.Index.ID)
	}
	end := orderedcode.PrefixEnd(prefix)
	for i, r := range p.Ranges {
		if r.End == nil {
			tb.Fatalf("range %d has no end", i)
		}
		if bytes.Compare(r.Start, r.End) >= 0 {
			tb.Fatalf("range %d is empty: % x .. % x", i, r.Start, r.End)
		}
		if bytes.Compare(r.Start, prefix) < 0 || bytes.Compare(r.End, end) > 0 {
			tb.Fatalf("range %d [% x, % x) outside key space [% x, % x)", i, r.Start, r.End, prefix, end)
		}
		if i > 0 && bytes.Compare(p.Ranges[i-1].End, r.Start) > 0 {
			tb.Fatalf("ranges %d and %d overlap or are out of order", i-1, i)
		}
	}
}

var negZero = math.Copysign(0, -1)
