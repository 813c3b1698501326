package client

import (
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// A transaction knows a record by its type and primary key. Records, Go
// key values and primary-key lookups all come down to one form, a record
// of the type holding only its primary-key fields: its deterministic
// encoding identifies the record (two spellings of one key are one
// record), and it is what a key condition names. Building it takes the
// schema (Types): the client has no other way to tell key fields apart.

// recKey is a record's identity in a transaction.
type recKey struct {
	id  string     // the type's full name, a zero byte, then key's bytes
	key *anypb.Any // a record of the type holding only its primary-key fields
}

// keyType is a record type's descriptor and its primary-key field paths,
// each resolved to the fields it passes through.
type keyType struct {
	name  string
	md    protoreflect.MessageDescriptor
	paths []string
	pk    [][]protoreflect.FieldDescriptor
}

func (t *Types) keyType(name string) (*keyType, error) {
	paths, ok := t.keys[name]
	if !ok {
		return nil, fmt.Errorf("no record type %q in schema version %d", name, t.version)
	}
	md, err := t.Descriptor(name)
	if err != nil {
		return nil, err
	}
	kt := &keyType{name: name, md: md, paths: paths}
	for _, p := range paths {
		fds, err := fieldPath(md, p)
		if err != nil {
			return nil, fmt.Errorf("%s: primary key %q: %w", name, p, err)
		}
		kt.pk = append(kt.pk, fds)
	}
	return kt, nil
}

// fieldPath resolves a dotted field path through singular message fields.
func fieldPath(md protoreflect.MessageDescriptor, path string) ([]protoreflect.FieldDescriptor, error) {
	var out []protoreflect.FieldDescriptor
	parts := strings.Split(path, ".")
	for i, part := range parts {
		fd := md.Fields().ByName(protoreflect.Name(part))
		if fd == nil {
			return nil, fmt.Errorf("no field %q in %s", part, md.FullName())
		}
		out = append(out, fd)
		if i == len(parts)-1 {
			break
		}
		if fd.Message() == nil || fd.IsList() || fd.IsMap() {
			return nil, fmt.Errorf("field %q of %s is not a singular message", part, md.FullName())
		}
		md = fd.Message()
	}
	return out, nil
}

// keyOf is the identity of the record m (a dynamic message of kt.md).
func (kt *keyType) keyOf(m protoreflect.Message) (recKey, error) {
	km := dynamicpb.NewMessage(kt.md)
	for _, fds := range kt.pk {
		copyKeyField(km, m, fds)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(km)
	if err != nil {
		return recKey{}, fmt.Errorf("%s: key: %w", kt.name, err)
	}
	return recKey{id: kt.name + "\x00" + string(b), key: &anypb.Any{TypeUrl: typeURLPrefix + kt.name, Value: b}}, nil
}

// copyKeyField copies the field at the end of fds from src to dst. A
// default value is left out, and so are the messages leading to it, so
// that a key spelled with an empty nested message and one without it
// encode alike (the server keys both the same).
func copyKeyField(dst, src protoreflect.Message, fds []protoreflect.FieldDescriptor) {
	last := len(fds) - 1
	for _, fd := range fds[:last] {
		if !src.Has(fd) {
			return
		}
		src = src.Get(fd).Message()
	}
	leaf := fds[last]
	v := src.Get(leaf)
	if !src.Has(leaf) || v.Equal(leaf.Default()) {
		return
	}
	for _, fd := range fds[:last] {
		dst = dst.Mutable(fd).Message()
	}
	dst.Set(leaf, v)
}

// recordKey is the identity of a stored or written record.
func (t *Types) recordKey(rec *anypb.Any) (*keyType, recKey, error) {
	if rec == nil {
		return nil, recKey{}, fmt.Errorf("record is nil")
	}
	kt, err := t.keyType(typeName(rec.GetTypeUrl()))
	if err != nil {
		return nil, recKey{}, err
	}
	m, err := t.Message(rec)
	if err != nil {
		return nil, recKey{}, err
	}
	k, err := kt.keyOf(m)
	return kt, k, err
}

// valueKey is the identity of a key given as Get takes it: a Go value of
// a one-field key, a []any or map[string]any of a compound one, or a
// message of the type with its key fields set. Go values are converted
// as protobuf JSON, as the server converts Get's keys.
func (t *Types) valueKey(kt *keyType, k any) (recKey, error) {
	if m, ok := k.(proto.Message); ok {
		a, err := anyOf(m)
		if err != nil {
			return recKey{}, err
		}
		if got := typeName(a.GetTypeUrl()); got != kt.name {
			return recKey{}, fmt.Errorf("a %s is not a key of %s", got, kt.name)
		}
		_, rk, err := t.recordKey(a)
		return rk, err
	}
	v, err := keyValue(k)
	if err != nil {
		return recKey{}, err
	}
	root := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	switch {
	case v.GetListValue() != nil:
		vs := v.GetListValue().GetValues()
		if len(vs) != len(kt.paths) {
			return recKey{}, fmt.Errorf("%d values for the primary key of %s, which has %d fields (%s)",
				len(vs), kt.name, len(kt.paths), strings.Join(kt.paths, ", "))
		}
		for i, p := range kt.paths {
			if err := putPath(root, p, vs[i]); err != nil {
				return recKey{}, err
			}
		}
	case v.GetStructValue() != nil:
		for p, fv := range v.GetStructValue().GetFields() {
			if err := putPath(root, p, fv); err != nil {
				return recKey{}, err
			}
		}
	case len(kt.paths) != 1:
		return recKey{}, fmt.Errorf("the primary key of %s has %d fields (%s): give a []any or a map[string]any",
			kt.name, len(kt.paths), strings.Join(kt.paths, ", "))
	default:
		if err := putPath(root, kt.paths[0], v); err != nil {
			return recKey{}, err
		}
	}
	js, err := protojson.Marshal(root)
	if err != nil {
		return recKey{}, err
	}
	m := dynamicpb.NewMessage(kt.md)
	if err := (protojson.UnmarshalOptions{Resolver: t.types}).Unmarshal(js, m); err != nil {
		return recKey{}, fmt.Errorf("key of %s: %w", kt.name, err)
	}
	return kt.keyOf(m)
}

// putPath sets the dotted path in root to v, nesting an object per dot.
func putPath(root *structpb.Struct, path string, v *structpb.Value) error {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := root.Fields[p]
		if !ok {
			next = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{}})
			root.Fields[p] = next
		}
		if next.GetStructValue() == nil {
			return fmt.Errorf("key field %q: %q is given a value and fields", path, p)
		}
		root = next.GetStructValue()
	}
	root.Fields[parts[len(parts)-1]] = v
	return nil
}

// lookupKey reports whether q reads one record by its primary key (Eq on
// each primary-key field, alone or under one And, and nothing that makes
// the answer other than the record: no text filter, keys_only or count),
// and if so returns its identity. A comparison whose operand does not fit
// its field exactly is no lookup: the query goes to the server as it is,
// which answers it or names the mistake.
func (t *Types) lookupKey(q *pb.Query) (recKey, bool) {
	if q.GetFilter() != "" || q.GetKeysOnly() || q.GetCount() || q.GetWhere() == nil {
		return recKey{}, false
	}
	kt, err := t.keyType(q.GetType())
	if err != nil {
		return recKey{}, false
	}
	cmps := []*pb.Comparison{q.GetWhere().GetCmp()}
	if and := q.GetWhere().GetAnd(); and != nil {
		cmps = cmps[:0]
		for _, x := range and.GetExprs() {
			cmps = append(cmps, x.GetCmp())
		}
	}
	if len(cmps) != len(kt.paths) {
		return recKey{}, false
	}
	m := dynamicpb.NewMessage(kt.md)
	seen := map[string]bool{}
	for _, c := range cmps {
		i := indexOf(kt.paths, c.GetField())
		if c == nil || c.GetOp() != pb.Op_OP_EQ || i < 0 || seen[c.GetField()] {
			return recKey{}, false
		}
		seen[c.GetField()] = true
		fds := kt.pk[i]
		v, ok := operand(fds[len(fds)-1], c.GetValue())
		if !ok {
			return recKey{}, false
		}
		dst := protoreflect.Message(m)
		for _, fd := range fds[:len(fds)-1] {
			dst = dst.Mutable(fd).Message()
		}
		dst.Set(fds[len(fds)-1], v)
	}
	k, err := kt.keyOf(m)
	return k, err == nil
}

func indexOf(xs []string, x string) int {
	for i, s := range xs {
		if s == x {
			return i
		}
	}
	return -1
}

// operand converts a comparison's operand to a value of the field fd,
// when it holds one exactly.
func operand(fd protoreflect.FieldDescriptor, v *pb.Value) (protoreflect.Value, bool) {
	var n int64 // an integer operand, when ok
	ok := false
	switch k := v.GetKind().(type) {
	case *pb.Value_Int:
		n, ok = k.Int, true
	case *pb.Value_Uint:
		n, ok = int64(k.Uint), k.Uint <= math.MaxInt64 //nolint:gosec // checked
		if fd.Kind() == protoreflect.Uint64Kind || fd.Kind() == protoreflect.Fixed64Kind {
			return protoreflect.ValueOfUint64(k.Uint), true
		}
	case *pb.Value_String_:
		return protoreflect.ValueOfString(k.String_), fd.Kind() == protoreflect.StringKind
	case *pb.Value_Bytes:
		return protoreflect.ValueOfBytes(k.Bytes), fd.Kind() == protoreflect.BytesKind
	case *pb.Value_Bool:
		return protoreflect.ValueOfBool(k.Bool), fd.Kind() == protoreflect.BoolKind
	case *pb.Value_Double:
		return protoreflect.ValueOfFloat64(k.Double), fd.Kind() == protoreflect.DoubleKind
	case *pb.Value_Enum:
		if fd.Kind() != protoreflect.EnumKind {
			return protoreflect.Value{}, false
		}
		ev := fd.Enum().Values().ByName(protoreflect.Name(k.Enum))
		if ev == nil {
			return protoreflect.Value{}, false
		}
		return protoreflect.ValueOfEnum(ev.Number()), true
	}
	if !ok {
		return protoreflect.Value{}, false
	}
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n)), n >= math.MinInt32 && n <= math.MaxInt32
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(n), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n)), n >= 0 && n <= math.MaxUint32 //nolint:gosec // checked
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n)), n >= 0 //nolint:gosec // checked
	}
	return protoreflect.Value{}, false
}
