package record

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// scalarKinds are the proto type names of every scalar kind, in field-number
// order: Record declares f_<name> = i+1, r_<name> = 21+i (packed where
// packable, as proto3 defaults) and, for packable kinds, u_<name> = 41+i
// [packed=false].
var scalarKinds = []string{
	"int32", "int64", "uint32", "uint64", "sint32", "sint64",
	"fixed32", "fixed64", "sfixed32", "sfixed64", "float", "double",
	"bool", "string", "bytes", "Color",
}

func fieldSuffix(kind string) string {
	if kind == "Color" {
		return "enum"
	}
	return kind
}

func testProto() string {
	var b strings.Builder
	b.WriteString(`syntax = "proto3";
package test;

enum Color {
  COLOR_UNSPECIFIED = 0;
  RED = 1;
  GREEN = 2;
  NEG = -5;
}

message Geo {
  double lat = 1;
  double lng = 2;
  repeated string labels = 3;
}

message Address {
  string city = 1;
  string zip = 2;
  int32 number = 3;
  Geo geo = 4;
}

message Item {
  string sku = 1;
  int32 qty = 2;
  repeated int32 codes = 3;
  Address ship = 4;
}

message Node {
  string name = 1;
  Node left = 2;
  repeated Node children = 3;
  int64 value = 4;
}

message Record {
`)
	for i, k := range scalarKinds {
		fmt.Fprintf(&b, "  %s f_%s = %d;\n", k, fieldSuffix(k), i+1)
	}
	for i, k := range scalarKinds {
		fmt.Fprintf(&b, "  repeated %s r_%s = %d;\n", k, fieldSuffix(k), 21+i)
	}
	for i, k := range scalarKinds {
		if k == "string" || k == "bytes" {
			continue
		}
		fmt.Fprintf(&b, "  repeated %s u_%s = %d [packed = false];\n", k, fieldSuffix(k), 41+i)
	}
	b.WriteString(`  Address address = 60;
  Node tree = 61;
  map<string, string> labels = 62;
  map<int32, Item> items_by_id = 63;
  repeated Item items = 64;
  oneof choice {
    string choice_str = 65;
    Address choice_addr = 66;
    int64 choice_int = 67;
  }
  optional int32 opt_int = 68;
  int32 big_number = 100000;
}
`)
	return b.String()
}

const legacyProto = `syntax = "proto2";
package legacy;

enum Kind {
  KIND_A = 1;
  KIND_B = 2;
}

message Req {
  required int32 x = 1;
}

message Legacy {
  required int32 id = 1;
  optional string name = 2 [default = "anon"];
  optional int32 level = 3 [default = -7];
  optional group Info = 4 {
    optional string note = 5;
    optional int32 rank = 6;
  }
  repeated group Entry = 7 {
    required string key = 8;
    optional bytes val = 9;
  }
  repeated int32 nums = 10 [packed = true];
  repeated int32 unpacked = 11;
  optional Kind kind = 12 [default = KIND_B];
  optional bytes blob = 13 [default = "xyz"];
  optional Legacy child = 14;
  optional double ratio = 15 [default = 1.5];
  optional bool flag = 16 [default = true];
  optional uint64 big = 17 [default = 18446744073709551615];
  optional Kind kind2 = 18;
  map<string, Req> reqs = 19;
  optional float fl = 20 [default = -2.5];
  extensions 100 to 200;
}
`

type schema struct {
	record, legacy, node, address protoreflect.MessageDescriptor
	recordT, legacyT, nodeT       *Type
}

var (
	schemaOnce sync.Once
	schemaVal  schema
	schemaErr  error
)

func loadSchema(tb testing.TB) *schema {
	tb.Helper()
	schemaOnce.Do(func() {
		c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{
				"test.proto":   testProto(),
				"legacy.proto": legacyProto,
			}),
		})}
		files, err := c.Compile(context.Background(), "test.proto", "legacy.proto")
		if err != nil {
			schemaErr = err
			return
		}
		s := &schemaVal
		s.record = files[0].Messages().ByName("Record")
		s.node = files[0].Messages().ByName("Node")
		s.address = files[0].Messages().ByName("Address")
		s.legacy = files[1].Messages().ByName("Legacy")
		for _, x := range []struct {
			md protoreflect.MessageDescriptor
			t  **Type
		}{{s.record, &s.recordT}, {s.legacy, &s.legacyT}, {s.node, &s.nodeT}} {
			if *x.t, err = Compile(x.md); err != nil {
				schemaErr = err
				return
			}
		}
	})
	if schemaErr != nil {
		tb.Fatal(schemaErr)
	}
	return &schemaVal
}

// --- building messages with dynamicpb ---

func field(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	fd := md.Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name + " in " + string(md.FullName()))
	}
	return fd
}

// sampleValue returns a distinctive value of fd's kind; i varies it and
// includes negative and extreme values.
func sampleValue(fd protoreflect.FieldDescriptor, i int) protoreflect.Value {
	neg := i%2 == 1
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(i%2 == 1)
	case protoreflect.EnumKind:
		vals := []protoreflect.EnumNumber{1, 2, -5, 0}
		return protoreflect.ValueOfEnum(vals[i%len(vals)])
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		v := int32(1234567 + i*1000)
		if neg {
			v = -v
		}
		if i == 3 {
			v = math.MinInt32
		}
		return protoreflect.ValueOfInt32(v)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		v := int64(1234567890123 + i)
		if neg {
			v = -v
		}
		if i == 3 {
			v = math.MinInt64
		}
		return protoreflect.ValueOfInt64(v)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if i == 3 {
			return protoreflect.ValueOfUint32(math.MaxUint32)
		}
		return protoreflect.ValueOfUint32(uint32(4000000000 - i))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if i == 3 {
			return protoreflect.ValueOfUint64(math.MaxUint64)
		}
		return protoreflect.ValueOfUint64(1<<63 + uint64(i))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(-1.5) * float32(i+1))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(3.25e100 * float64(i+1))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("héllo-%d ✓", i))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0xff, 0x00, byte(i)})
	}
	panic("not scalar: " + fd.FullName())
}

func newAddress(md protoreflect.MessageDescriptor, city, zip string, number int32) *dynamicpb.Message {
	m := dynamicpb.NewMessage(md)
	m.Set(field(md, "city"), protoreflect.ValueOfString(city))
	m.Set(field(md, "zip"), protoreflect.ValueOfString(zip))
	m.Set(field(md, "number"), protoreflect.ValueOfInt32(number))
	geoFD := field(md, "geo")
	geo := dynamicpb.NewMessage(geoFD.Message())
	geo.Set(field(geoFD.Message(), "lat"), protoreflect.ValueOfFloat64(52.52))
	geo.Set(field(geoFD.Message(), "lng"), protoreflect.ValueOfFloat64(-13.4))
	labels := geo.Mutable(field(geoFD.Message(), "labels")).List()
	labels.Append(protoreflect.ValueOfString("home"))
	labels.Append(protoreflect.ValueOfString("wörk"))
	m.Set(geoFD, protoreflect.ValueOfMessage(geo))
	return m
}

// fullRecord sets every field of Record (the oneof to its message member).
func fullRecord(s *schema) *dynamicpb.Message {
	md := s.record
	m := dynamicpb.NewMessage(md)
	fds := md.Fields()
	for i := 0; i < fds.Len(); i++ {
		fd := fds.Get(i)
		switch {
		case fd.IsList() && fd.Message() == nil:
			l := m.Mutable(fd).List()
			for j := 0; j < 4; j++ {
				l.Append(sampleValue(fd, j))
			}
		case fd.Message() == nil && fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic():
			// The oneof gets its message member below.
		case fd.Message() == nil:
			m.Set(fd, sampleValue(fd, int(fd.Number())%4))
		}
	}
	m.Set(field(md, "address"), protoreflect.ValueOfMessage(newAddress(s.address, "Berlin", "10115", 42)))
	m.Set(field(md, "choice_addr"), protoreflect.ValueOfMessage(newAddress(s.address, "Zürich", "8000", -1)))
	m.Set(field(md, "tree"), protoreflect.ValueOfMessage(tree(s.node, 3)))

	labels := m.Mutable(field(md, "labels")).Map()
	labels.Set(protoreflect.ValueOfString("env").MapKey(), protoreflect.ValueOfString("prod"))
	labels.Set(protoreflect.ValueOfString("ünï").MapKey(), protoreflect.ValueOfString("cödé"))

	itemFD := field(md, "items")
	items := m.Mutable(itemFD).List()
	byID := m.Mutable(field(md, "items_by_id")).Map()
	for j := 0; j < 3; j++ {
		it := item(s, itemFD.Message(), j)
		items.Append(protoreflect.ValueOfMessage(it))
		byID.Set(protoreflect.ValueOfInt32(int32(j-1)).MapKey(), protoreflect.ValueOfMessage(it))
	}
	return m
}

func item(s *schema, md protoreflect.MessageDescriptor, j int) *dynamicpb.Message {
	it := dynamicpb.NewMessage(md)
	it.Set(field(md, "sku"), protoreflect.ValueOfString(fmt.Sprintf("SKU-%d", j)))
	it.Set(field(md, "qty"), protoreflect.ValueOfInt32(int32(j*7-3)))
	codes := it.Mutable(field(md, "codes")).List()
	for k := 0; k <= j; k++ {
		codes.Append(protoreflect.ValueOfInt32(int32(100*j + k)))
	}
	if j != 1 {
		it.Set(field(md, "ship"), protoreflect.ValueOfMessage(newAddress(s.address, fmt.Sprintf("city%d", j), "", int32(j))))
	}
	return it
}

// tree returns a Node of the given depth with two children per level.
func tree(md protoreflect.MessageDescriptor, depth int) *dynamicpb.Message {
	n := dynamicpb.NewMessage(md)
	n.Set(field(md, "name"), protoreflect.ValueOfString(fmt.Sprintf("n%d", depth)))
	n.Set(field(md, "value"), protoreflect.ValueOfInt64(int64(-depth)))
	if depth > 0 {
		n.Set(field(md, "left"), protoreflect.ValueOfMessage(tree(md, depth-1)))
		kids := n.Mutable(field(md, "children")).List()
		kids.Append(protoreflect.ValueOfMessage(tree(md, depth-1)))
		kids.Append(protoreflect.ValueOfMessage(tree(md, 0)))
	}
	return n
}

func fullLegacy(s *schema) *dynamicpb.Message {
	md := s.legacy
	m := dynamicpb.NewMessage(md)
	m.Set(field(md, "id"), protoreflect.ValueOfInt32(-99))
	m.Set(field(md, "name"), protoreflect.ValueOfString("legacy"))
	m.Set(field(md, "level"), protoreflect.ValueOfInt32(3))
	infoFD := field(md, "info")
	info := dynamicpb.NewMessage(infoFD.Message())
	info.Set(field(infoFD.Message(), "note"), protoreflect.ValueOfString("a note"))
	info.Set(field(infoFD.Message(), "rank"), protoreflect.ValueOfInt32(5))
	m.Set(infoFD, protoreflect.ValueOfMessage(info))
	entryFD := field(md, "entry")
	entries := m.Mutable(entryFD).List()
	for j := 0; j < 2; j++ {
		e := dynamicpb.NewMessage(entryFD.Message())
		e.Set(field(entryFD.Message(), "key"), protoreflect.ValueOfString(fmt.Sprintf("k%d", j)))
		e.Set(field(entryFD.Message(), "val"), protoreflect.ValueOfBytes([]byte{byte(j), 0xfe}))
		entries.Append(protoreflect.ValueOfMessage(e))
	}
	for _, name := range []string{"nums", "unpacked"} {
		l := m.Mutable(field(md, name)).List()
		for j := int32(-2); j < 3; j++ {
			l.Append(protoreflect.ValueOfInt32(j * 1000))
		}
	}
	m.Set(field(md, "kind"), protoreflect.ValueOfEnum(1))
	child := dynamicpb.NewMessage(md)
	child.Set(field(md, "id"), protoreflect.ValueOfInt32(7))
	child.Set(field(md, "name"), protoreflect.ValueOfString("child"))
	m.Set(field(md, "child"), protoreflect.ValueOfMessage(child))
	m.Set(field(md, "ratio"), protoreflect.ValueOfFloat64(0.25))
	reqsFD := field(md, "reqs")
	req := dynamicpb.NewMessage(reqsFD.MapValue().Message())
	req.Set(field(req.Descriptor(), "x"), protoreflect.ValueOfInt32(1))
	m.Mutable(reqsFD).Map().Set(protoreflect.ValueOfString("r").MapKey(), protoreflect.ValueOfMessage(req))
	return m
}

func marshal(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// --- raw wire builders for malformed input ---

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func tagB(num protowire.Number, wt protowire.Type) []byte {
	return protowire.AppendTag(nil, num, wt)
}

func vint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(tagB(num, protowire.VarintType), v)
}

func lenF(num protowire.Number, payload ...[]byte) []byte {
	return protowire.AppendBytes(tagB(num, protowire.BytesType), cat(payload...))
}

func str(num protowire.Number, s string) []byte { return lenF(num, []byte(s)) }

func fix32(num protowire.Number, v uint32) []byte {
	return protowire.AppendFixed32(tagB(num, protowire.Fixed32Type), v)
}

func fix64(num protowire.Number, v uint64) []byte {
	return protowire.AppendFixed64(tagB(num, protowire.Fixed64Type), v)
}

func group(num protowire.Number, content ...[]byte) []byte {
	return cat(tagB(num, protowire.StartGroupType), cat(content...), tagB(num, protowire.EndGroupType))
}

// --- reflection oracles ---

// scalarOf converts a protoreflect value the way Path decodes wire bytes.
func scalarOf(fd protoreflect.FieldDescriptor, v protoreflect.Value) Scalar {
	s := Scalar{Kind: fd.Kind()}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		s.Bool = v.Bool()
	case protoreflect.EnumKind:
		s.Int = int64(v.Enum())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		s.Int = v.Int()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		s.Uint = v.Uint()
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		s.Float = v.Float()
	case protoreflect.StringKind:
		s.Bytes = []byte(v.String())
	case protoreflect.BytesKind:
		s.Bytes = v.Bytes()
	}
	return s
}

func scalarEqual(a, b Scalar) bool {
	return a.Kind == b.Kind && a.Int == b.Int && a.Uint == b.Uint && a.Bool == b.Bool &&
		math.Float64bits(a.Float) == math.Float64bits(b.Float) && bytes.Equal(a.Bytes, b.Bytes)
}

func (s Scalar) String() string {
	return fmt.Sprintf("{%v int=%d uint=%d float=%g bool=%v bytes=%q}", s.Kind, s.Int, s.Uint, s.Float, s.Bool, s.Bytes)
}

func pathFields(md protoreflect.MessageDescriptor, path string) []protoreflect.FieldDescriptor {
	var fds []protoreflect.FieldDescriptor
	for _, name := range strings.Split(path, ".") {
		fd := field(md, name)
		fds = append(fds, fd)
		md = fd.Message()
	}
	return fds
}

// refEach is the reflective model of Path.Each on a decoded message. Map
// fields along the path are visited in unspecified order.
func refEach(m protoreflect.Message, fds []protoreflect.FieldDescriptor, fn func(Scalar)) {
	fd := fds[0]
	v := m.Get(fd)
	switch {
	case len(fds) == 1 && fd.IsList():
		for i := 0; i < v.List().Len(); i++ {
			fn(scalarOf(fd, v.List().Get(i)))
		}
	case len(fds) == 1:
		fn(scalarOf(fd, v))
	case fd.IsList():
		for i := 0; i < v.List().Len(); i++ {
			refEach(v.List().Get(i).Message(), fds[1:], fn)
		}
	case fd.IsMap():
		entry := fd.Message()
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			e := dynamicpb.NewMessage(entry)
			e.Set(entry.Fields().ByNumber(1), k.Value())
			e.Set(entry.Fields().ByNumber(2), mv)
			refEach(e, fds[1:], fn)
			return true
		})
	default:
		refEach(v.Message(), fds[1:], fn)
	}
}

// refFound reports whether the value at a singular path is present, for
// fields that track presence (ok=false when the last field does not).
func refFound(m protoreflect.Message, fds []protoreflect.FieldDescriptor) (found, ok bool) {
	for _, fd := range fds[:len(fds)-1] {
		if !m.Has(fd) {
			return false, true
		}
		m = m.Get(fd).Message()
	}
	last := fds[len(fds)-1]
	if !last.HasPresence() {
		return false, false
	}
	return m.Has(last), true
}

// unmarshal is the oracle's proto.Unmarshal into a fresh dynamic message. The
// runtime can panic on some malformed map entries (a repeated key whose second
// occurrence has the wrong wire type leaves a nil key); that counts as a
// rejection, since Validate must refuse such input anyway.
func unmarshal(md protoreflect.MessageDescriptor, b []byte) (m *dynamicpb.Message, err error) {
	m = dynamicpb.NewMessage(md)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("proto.Unmarshal panicked: %v", r)
		}
	}()
	return m, proto.Unmarshal(b, m)
}

// unknownPath returns the path of a message holding unknown fields, or "".
func unknownPath(m protoreflect.Message, at string) string {
	if len(m.GetUnknown()) > 0 {
		return at + "<root>"
	}
	var found string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := at + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && found == ""; i++ {
				found = unknownPath(v.List().Get(i).Message(), fmt.Sprintf("%s[%d].", name, i))
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				found = unknownPath(mv.Message(), fmt.Sprintf("%s[%v].", name, k))
				return found == ""
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			found = unknownPath(v.Message(), name+".")
		}
		return found == ""
	})
	return found
}

// allPaths lists every field path of md that does not revisit a message type
// on the way, plus a few recursive ones, for exhaustive path tests.
func allPaths(md protoreflect.MessageDescriptor) []string {
	var out []string
	var walk func(md protoreflect.MessageDescriptor, prefix string, seen map[protoreflect.FullName]int)
	walk = func(md protoreflect.MessageDescriptor, prefix string, seen map[protoreflect.FullName]int) {
		if seen[md.FullName()] >= 2 {
			return
		}
		seen[md.FullName()]++
		defer func() { seen[md.FullName()]-- }()
		fds := md.Fields()
		for i := 0; i < fds.Len(); i++ {
			fd := fds.Get(i)
			p := prefix + string(fd.Name())
			out = append(out, p)
			if fd.Message() != nil {
				walk(fd.Message(), p+".", seen)
			}
		}
	}
	walk(md, "", map[protoreflect.FullName]int{})
	return out
}
