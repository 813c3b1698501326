package engine

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// parsedCopy keeps every field of a Query but filter and where, whatever
// fields Query has: each is set (a field added to Query and not to
// parsedCopy fails here), and sub-messages are copies, not q's own.
func TestParsedCopy(t *testing.T) {
	q := &pb.Query{}
	m := q.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Name() == "filter" || fd.Name() == "where" {
			continue
		}
		setSome(m, fd)
	}
	m.SetUnknown(protoreflect.RawFields{0xf8, 0x3e, 0x01}) // field 999, varint 1
	where := &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id", Op: pb.Op_OP_EQ}}}
	got := parsedCopy(q, where)

	want := proto.CloneOf(q)
	want.Where = where
	if !proto.Equal(got, want) {
		t.Fatalf("parsedCopy:\n got %v\nwant %v", got, want)
	}
	gm := got.ProtoReflect()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Message() != nil && fd.Name() != "where" && gm.Get(fd).Message().Interface() == m.Get(fd).Message().Interface() {
			t.Errorf("field %s: the copy shares the query's message", fd.Name())
		}
	}
}

// setSome gives field fd of m a value other than its default; a message
// field gets a message with each of its own fields set.
func setSome(m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	switch {
	case fd.IsList():
		l := m.Mutable(fd).List()
		if fd.Message() != nil {
			e := l.NewElement()
			fillMessage(e.Message())
			l.Append(e)
		} else {
			l.Append(someScalar(fd))
		}
	case fd.IsMap():
		// Query has no map fields; a map field added to it fails here.
		panic("setSome: map field " + string(fd.FullName()))
	case fd.Message() != nil:
		fillMessage(m.Mutable(fd).Message())
	default:
		m.Set(fd, someScalar(fd))
	}
}

func fillMessage(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && i > 0 && fields.Get(i-1).ContainingOneof() == fd.ContainingOneof() {
			continue // one member of a oneof is enough
		}
		if fd.Message() == nil || fd.Message().FullName() != m.Descriptor().FullName() {
			setSome(m, fd)
		}
	}
}

func someScalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{1})
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1.5)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1.5)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	default:
		return protoreflect.ValueOfUint64(7)
	}
}
