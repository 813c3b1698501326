package record

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

func mustPath(t testing.TB, typ *Type, path string) *Path {
	t.Helper()
	p, err := typ.Path(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func collect(t testing.TB, p *Path, b []byte) []Scalar {
	t.Helper()
	var out []Scalar
	if err := p.Each(b, func(s Scalar) bool { out = append(out, s); return true }); err != nil {
		t.Fatalf("Each(%s): %v", p, err)
	}
	return out
}

func TestPathAccessors(t *testing.T) {
	s := loadSchema(t)
	p := mustPath(t, s.recordT, "address.geo.lat")
	if p.String() != "address.geo.lat" {
		t.Errorf("String() = %q", p.String())
	}
	if p.Field().FullName() != "test.Geo.lat" {
		t.Errorf("Field() = %s", p.Field().FullName())
	}
	if got := p.Numbers(); !slices.Equal(got, []protowire.Number{60, 4, 1}) {
		t.Errorf("Numbers() = %v", got)
	}
	p.Numbers()[0] = 99 // must not affect the Path
	if p.Numbers()[0] != 60 {
		t.Error("Numbers() exposes internal state")
	}
	// Group fields are addressed by their (lower-case) field name.
	if got := mustPath(t, s.legacyT, "entry.key").Numbers(); !slices.Equal(got, []protowire.Number{7, 8}) {
		t.Errorf("entry.key Numbers() = %v", got)
	}
}

func TestPathCompileErrors(t *testing.T) {
	s := loadSchema(t)
	for path, want := range map[string]string{
		"":                   "empty path",
		"nope":               `message test.Record has no field "nope"`,
		"address.nope":       `message test.Address has no field "nope"`,
		"address..city":      "empty segment",
		"address.":           "empty segment",
		"f_int32.x":          `field "f_int32" is a int32, not a message, so it has no field "x"`,
		"address.city.x":     `field "city" is a string, not a message, so it has no field "x"`,
		"Address":            `no field "Address"`,
		"items_by_id.value.": "empty segment",
	} {
		_, err := s.recordT.Path(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Path(%q) error = %v, want containing %q", path, err, want)
		}
	}
}

func TestGetEveryKind(t *testing.T) {
	s := loadSchema(t)
	m := fullRecord(s)
	b := marshal(t, m)
	for _, k := range scalarKinds {
		name := "f_" + fieldSuffix(k)
		fd := field(s.record, name)
		v, found, err := mustPath(t, s.recordT, name).Get(b)
		if err != nil || !found {
			t.Fatalf("%s: found=%v err=%v", name, found, err)
		}
		if want := scalarOf(fd, m.Get(fd)); !scalarEqual(v, want) {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
		// Absent: the zero value, not found.
		v, found, err = mustPath(t, s.recordT, name).Get(vint(100000, 1))
		if err != nil || found || !scalarEqual(v, Scalar{Kind: fd.Kind()}) {
			t.Errorf("%s absent = %v found=%v err=%v", name, v, found, err)
		}
	}
}

func TestEachEveryKind(t *testing.T) {
	s := loadSchema(t)
	m := fullRecord(s)
	b := marshal(t, m)
	for _, k := range scalarKinds {
		for _, prefix := range []string{"r_", "u_"} {
			name := prefix + fieldSuffix(k)
			fd := s.record.Fields().ByName(protoreflect.Name(name))
			if fd == nil {
				continue // strings and bytes are never packed
			}
			var want []Scalar
			l := m.Get(fd).List()
			for i := 0; i < l.Len(); i++ {
				want = append(want, scalarOf(fd, l.Get(i)))
			}
			got := collect(t, mustPath(t, s.recordT, name), b)
			if !slices.EqualFunc(got, want, scalarEqual) {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
	}
}

func TestScalarDecoding(t *testing.T) {
	s := loadSchema(t)
	tests := []struct {
		path string
		b    []byte
		want Scalar
	}{
		// int32 and enums are sign-extended from 32 bits; wider varints truncate.
		{"f_int32", vint(1, 0xFFFFFFFF), Scalar{Kind: protoreflect.Int32Kind, Int: -1}},
		{"f_int32", vint(1, math.MaxUint64), Scalar{Kind: protoreflect.Int32Kind, Int: -1}},
		{"f_int32", vint(1, 1<<40|5), Scalar{Kind: protoreflect.Int32Kind, Int: 5}},
		{"f_enum", vint(16, math.MaxUint64-4), Scalar{Kind: protoreflect.EnumKind, Int: -5}},
		{"f_enum", vint(16, 77), Scalar{Kind: protoreflect.EnumKind, Int: 77}},
		{"f_int64", vint(2, math.MaxUint64), Scalar{Kind: protoreflect.Int64Kind, Int: -1}},
		{"f_uint32", vint(3, 1<<32+7), Scalar{Kind: protoreflect.Uint32Kind, Uint: 7}},
		{"f_uint64", vint(4, math.MaxUint64), Scalar{Kind: protoreflect.Uint64Kind, Uint: math.MaxUint64}},
		{"f_sint32", vint(5, 3), Scalar{Kind: protoreflect.Sint32Kind, Int: -2}},
		{"f_sint32", vint(5, 1<<33|4), Scalar{Kind: protoreflect.Sint32Kind, Int: 2}},
		{"f_sint64", vint(6, math.MaxUint64), Scalar{Kind: protoreflect.Sint64Kind, Int: math.MinInt64}},
		{"f_fixed32", fix32(7, 0xdeadbeef), Scalar{Kind: protoreflect.Fixed32Kind, Uint: 0xdeadbeef}},
		{"f_fixed64", fix64(8, 1<<63), Scalar{Kind: protoreflect.Fixed64Kind, Uint: 1 << 63}},
		{"f_sfixed32", fix32(9, 0xfffffffe), Scalar{Kind: protoreflect.Sfixed32Kind, Int: -2}},
		{"f_sfixed64", fix64(10, math.MaxUint64), Scalar{Kind: protoreflect.Sfixed64Kind, Int: -1}},
		{"f_float", fix32(11, math.Float32bits(1.5)), Scalar{Kind: protoreflect.FloatKind, Float: 1.5}},
		{"f_float", fix32(11, math.Float32bits(0.1)), Scalar{Kind: protoreflect.FloatKind, Float: float64(float32(0.1))}},
		{"f_double", fix64(12, math.Float64bits(-0.1)), Scalar{Kind: protoreflect.DoubleKind, Float: -0.1}},
		{"f_bool", vint(13, 2), Scalar{Kind: protoreflect.BoolKind, Bool: true}},
		{"f_bool", vint(13, 0), Scalar{Kind: protoreflect.BoolKind, Bool: false}},
		{"f_string", str(14, "héllo"), Scalar{Kind: protoreflect.StringKind, Bytes: []byte("héllo")}},
		{"f_bytes", lenF(15, []byte{0, 0xff}), Scalar{Kind: protoreflect.BytesKind, Bytes: []byte{0, 0xff}}},
		{"big_number", vint(100000, 9), Scalar{Kind: protoreflect.Int32Kind, Int: 9}},
	}
	for _, tc := range tests {
		v, found, err := mustPath(t, s.recordT, tc.path).Get(tc.b)
		if err != nil || !found || !scalarEqual(v, tc.want) {
			t.Errorf("%s from %x = %v found=%v err=%v, want %v", tc.path, tc.b, v, found, err, tc.want)
		}
		// The runtime must decode the same value.
		m := dynamicpb.NewMessage(s.record)
		if err := proto.Unmarshal(tc.b, m); err != nil {
			t.Fatal(err)
		}
		fd := field(s.record, tc.path)
		if want := scalarOf(fd, m.Get(fd)); !scalarEqual(v, want) {
			t.Errorf("%s from %x = %v, runtime says %v", tc.path, tc.b, v, want)
		}
	}
}

func TestGetBytesAliasRecord(t *testing.T) {
	s := loadSchema(t)
	b := cat(str(14, "abc"), vint(1, 1))
	v, _, err := mustPath(t, s.recordT, "f_string").Get(b)
	if err != nil {
		t.Fatal(err)
	}
	if &v.Bytes[0] != &b[2] {
		t.Error("Bytes does not alias the record")
	}
	if cap(v.Bytes) != len(v.Bytes) {
		t.Error("Bytes capacity not clipped: appending would overwrite the record")
	}
}

func TestGetLastWinsAndMerge(t *testing.T) {
	s := loadSchema(t)
	addr := func(fields ...[]byte) []byte { return lenF(60, fields...) }
	tests := []struct {
		name  string
		path  string
		b     []byte
		want  Scalar
		found bool
	}{
		{"last scalar wins", "f_int32", cat(vint(1, 1), vint(2, 5), vint(1, 2)), Scalar{Kind: protoreflect.Int32Kind, Int: 2}, true},
		{"nested last wins across occurrences", "address.city", cat(addr(str(1, "a")), addr(str(2, "z")), addr(str(1, "b"))),
			Scalar{Kind: protoreflect.StringKind, Bytes: []byte("b")}, true},
		{"nested merge keeps earlier field", "address.zip", cat(addr(str(2, "z")), addr(str(1, "b"))),
			Scalar{Kind: protoreflect.StringKind, Bytes: []byte("z")}, true},
		{"nested absent in all occurrences", "address.number", cat(addr(str(2, "z")), addr()),
			Scalar{Kind: protoreflect.Int32Kind}, false},
		{"two levels", "address.geo.lat", cat(addr(lenF(4, fix64(1, math.Float64bits(1)))), addr(lenF(4, fix64(2, 0)))),
			Scalar{Kind: protoreflect.DoubleKind, Float: 1}, true},
		{"explicit zero is found", "f_int32", vint(1, 0), Scalar{Kind: protoreflect.Int32Kind}, true},
		{"proto3 optional", "opt_int", vint(68, 0), Scalar{Kind: protoreflect.Int32Kind}, true},
		{"oneof sibling clears scalar", "choice_str", cat(str(65, "s"), vint(67, 5)), Scalar{Kind: protoreflect.StringKind}, false},
		{"oneof member set after sibling", "choice_str", cat(vint(67, 5), str(65, "s")), Scalar{Kind: protoreflect.StringKind, Bytes: []byte("s")}, true},
		{"oneof sibling clears message", "choice_addr.city", cat(lenF(66, str(1, "x")), vint(67, 5)), Scalar{Kind: protoreflect.StringKind}, false},
		{"oneof message re-set after clear", "choice_addr.zip", cat(lenF(66, str(1, "x"), str(2, "old")), vint(67, 5), lenF(66, str(1, "y"))),
			Scalar{Kind: protoreflect.StringKind}, false},
		{"oneof message re-set after clear keeps new", "choice_addr.city", cat(lenF(66, str(1, "x")), str(65, "s"), lenF(66, str(1, "y"))),
			Scalar{Kind: protoreflect.StringKind, Bytes: []byte("y")}, true},
		{"synthetic oneof does not clear", "opt_int", cat(vint(68, 3), vint(1, 1)), Scalar{Kind: protoreflect.Int32Kind, Int: 3}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPath(t, s.recordT, tc.path)
			v, found, err := p.Get(tc.b)
			if err != nil || found != tc.found || !scalarEqual(v, tc.want) {
				t.Fatalf("Get = %v found=%v err=%v, want %v found=%v", v, found, err, tc.want, tc.found)
			}
			// Each on a singular path yields exactly Get's value.
			if got := collect(t, p, tc.b); len(got) != 1 || !scalarEqual(got[0], tc.want) {
				t.Errorf("Each = %v, want [%v]", got, tc.want)
			}
			// And both agree with a full decode.
			m := dynamicpb.NewMessage(s.record)
			if err := proto.Unmarshal(tc.b, m); err != nil {
				t.Fatal(err)
			}
			checkAgainstRuntime(t, s.recordT, m, tc.path, tc.b)
		})
	}
}

func TestGetDefaults(t *testing.T) {
	s := loadSchema(t)
	b := vint(1, 1) // Legacy with only its required id
	tests := []struct {
		path string
		want Scalar
	}{
		{"name", Scalar{Kind: protoreflect.StringKind, Bytes: []byte("anon")}},
		{"level", Scalar{Kind: protoreflect.Int32Kind, Int: -7}},
		{"kind", Scalar{Kind: protoreflect.EnumKind, Int: 2}},
		{"kind2", Scalar{Kind: protoreflect.EnumKind, Int: 1}}, // first value of a proto2 enum
		{"blob", Scalar{Kind: protoreflect.BytesKind, Bytes: []byte("xyz")}},
		{"ratio", Scalar{Kind: protoreflect.DoubleKind, Float: 1.5}},
		{"fl", Scalar{Kind: protoreflect.FloatKind, Float: -2.5}},
		{"flag", Scalar{Kind: protoreflect.BoolKind, Bool: true}},
		{"big", Scalar{Kind: protoreflect.Uint64Kind, Uint: math.MaxUint64}},
		{"info.note", Scalar{Kind: protoreflect.StringKind}},
		{"child.name", Scalar{Kind: protoreflect.StringKind, Bytes: []byte("anon")}},
		{"child.child.level", Scalar{Kind: protoreflect.Int32Kind, Int: -7}},
	}
	for _, tc := range tests {
		v, found, err := mustPath(t, s.legacyT, tc.path).Get(b)
		if err != nil || found || !scalarEqual(v, tc.want) {
			t.Errorf("%s = %v found=%v err=%v, want default %v", tc.path, v, found, err, tc.want)
		}
	}
	// Present values override defaults, including inside groups.
	b = marshal(t, fullLegacy(s))
	for path, want := range map[string]Scalar{
		"name":       {Kind: protoreflect.StringKind, Bytes: []byte("legacy")},
		"info.rank":  {Kind: protoreflect.Int32Kind, Int: 5},
		"info.note":  {Kind: protoreflect.StringKind, Bytes: []byte("a note")},
		"child.id":   {Kind: protoreflect.Int32Kind, Int: 7},
		"kind":       {Kind: protoreflect.EnumKind, Int: 1},
		"child.kind": {Kind: protoreflect.EnumKind, Int: 2},
	} {
		v, found, err := mustPath(t, s.legacyT, path).Get(b)
		wantFound := path != "child.kind"
		if err != nil || found != wantFound || !scalarEqual(v, want) {
			t.Errorf("%s = %v found=%v err=%v, want %v", path, v, found, err, want)
		}
	}
}

func TestGetErrors(t *testing.T) {
	s := loadSchema(t)
	for path, want := range map[string]string{
		"r_int32":           `field "r_int32" is repeated; use Each`,
		"items.sku":         `field "items" is repeated; use Each`,
		"labels.key":        `field "labels" is repeated; use Each`,
		"address":           `ends at message field "address", not a scalar`,
		"address.geo":       `ends at message field "geo", not a scalar`,
		"items_by_id.value": `ends at message field "value", not a scalar`,
	} {
		p := mustPath(t, s.recordT, path)
		if _, _, err := p.Get(nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Get(%s) error = %v, want %q", path, err, want)
		}
		if strings.Contains(want, "not a scalar") {
			if err := p.Each(nil, func(Scalar) bool { return true }); err == nil {
				t.Errorf("Each(%s) succeeded on a message path", path)
			}
		}
	}
	// Malformed bytes produce *Error, with a field path when known.
	for _, tc := range []struct {
		path, field, reason string
		b                   []byte
	}{
		{"f_int32", "", "truncated tag", []byte{0x80}},
		{"f_int32", "f_int32", "truncated varint", []byte{0x08}},
		{"f_int32", "f_int32", "wire type bytes, want varint", str(1, "x")},
		{"f_int32", "", "truncated length-delimited value", []byte{0x12, 5}},
		{"address.city", "address", "wire type varint, want bytes", vint(60, 1)},
		{"address.city", "address.city", "truncated length-delimited value", lenF(60, []byte{0x0a, 4})},
		{"address.city", "address", "unexpected end-group tag", lenF(60, tagB(9, protowire.EndGroupType))},
		{"f_int32", "", "invalid field number 0", []byte{0}},
	} {
		_, _, err := mustPath(t, s.recordT, tc.path).Get(tc.b)
		var e *Error
		if !errors.As(err, &e) || e.Field != tc.field || e.Reason != tc.reason {
			t.Errorf("Get(%s, %x) error = %#v, want field %q reason %q", tc.path, tc.b, err, tc.field, tc.reason)
		}
	}
}

func TestGetAllocs(t *testing.T) {
	s := loadSchema(t)
	b := benchRecord(t, s)
	for _, path := range []string{"f_int32", "f_string", "address.geo.lat", "f_uint64"} {
		p := mustPath(t, s.recordT, path)
		if n := testing.AllocsPerRun(100, func() { _, _, _ = p.Get(b) }); n != 0 {
			t.Errorf("Get(%s) allocates %v times", path, n)
		}
	}
}

func TestEachRepeated(t *testing.T) {
	s := loadSchema(t)
	ints := func(ss []Scalar) []int64 {
		var out []int64
		for _, s := range ss {
			out = append(out, s.Int)
		}
		return out
	}
	strs := func(ss []Scalar) []string {
		var out []string
		for _, s := range ss {
			out = append(out, string(s.Bytes))
		}
		return out
	}
	// Packed and unpacked occurrences of one field concatenate.
	b := cat(lenF(21, []byte{1, 2}), vint(21, 3), vint(1, 9), lenF(21), lenF(21, []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0x0f}))
	if got := ints(collect(t, mustPath(t, s.recordT, "r_int32"), b)); !slices.Equal(got, []int64{1, 2, 3, 127, -1}) {
		t.Errorf("r_int32 = %v", got)
	}
	// Fixed-width packed runs.
	b = cat(lenF(29, protowire.AppendFixed32(protowire.AppendFixed32(nil, 1), 0xffffffff)), fix32(29, 7))
	if got := ints(collect(t, mustPath(t, s.recordT, "r_sfixed32"), b)); !slices.Equal(got, []int64{1, -1, 7}) {
		t.Errorf("r_sfixed32 = %v", got)
	}
	// Repeated messages along the path: one value per element, defaults for
	// elements that lack the field.
	rec := marshal(t, fullRecord(s))
	if got := strs(collect(t, mustPath(t, s.recordT, "items.ship.city"), rec)); !slices.Equal(got, []string{"city0", "", "city2"}) {
		t.Errorf("items.ship.city = %q", got)
	}
	if got := ints(collect(t, mustPath(t, s.recordT, "items.codes"), rec)); !slices.Equal(got, []int64{0, 100, 101, 200, 201, 202}) {
		t.Errorf("items.codes = %v", got)
	}
	// A singular message that occurs twice merges: its lists concatenate, and
	// a oneof sibling in between discards what came before.
	geo := func(label string) []byte { return lenF(4, str(3, label)) }
	b = cat(lenF(60, geo("a")), lenF(60, geo("b")), lenF(66, geo("x")), vint(67, 1), lenF(66, geo("y")), lenF(66, geo("z")))
	if got := strs(collect(t, mustPath(t, s.recordT, "address.geo.labels"), b)); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("address.geo.labels = %q", got)
	}
	if got := strs(collect(t, mustPath(t, s.recordT, "choice_addr.geo.labels"), b)); !slices.Equal(got, []string{"y", "z"}) {
		t.Errorf("choice_addr.geo.labels = %q", got)
	}
	// Absent repeated path: nothing. Absent singular path: the default once.
	if got := collect(t, mustPath(t, s.recordT, "items.sku"), nil); len(got) != 0 {
		t.Errorf("items.sku on empty = %v", got)
	}
	if got := collect(t, mustPath(t, s.recordT, "tree.left.value"), nil); len(got) != 1 || got[0].Int != 0 {
		t.Errorf("tree.left.value on empty = %v", got)
	}
	// Maps: entries are messages with fields key and value.
	if got := strs(collect(t, mustPath(t, s.recordT, "labels.key"), rec)); !slices.Equal(sorted(got), []string{"env", "ünï"}) {
		t.Errorf("labels.key = %q", got)
	}
	if got := strs(collect(t, mustPath(t, s.recordT, "items_by_id.value.sku"), rec)); !slices.Equal(sorted(got), []string{"SKU-0", "SKU-1", "SKU-2"}) {
		t.Errorf("items_by_id.value.sku = %q", got)
	}
	// Groups along the path.
	leg := marshal(t, fullLegacy(s))
	if got := strs(collect(t, mustPath(t, s.legacyT, "entry.key"), leg)); !slices.Equal(got, []string{"k0", "k1"}) {
		t.Errorf("entry.key = %q", got)
	}
	// Early stop.
	calls := 0
	err := mustPath(t, s.recordT, "items.codes").Each(rec, func(Scalar) bool { calls++; return calls < 2 })
	if err != nil || calls != 2 {
		t.Errorf("early stop: calls=%d err=%v", calls, err)
	}
	calls = 0
	err = mustPath(t, s.recordT, "r_int32").Each(cat(lenF(21, []byte{1, 2, 3}), vint(21, 4)), func(Scalar) bool { calls++; return false })
	if err != nil || calls != 1 {
		t.Errorf("early stop in packed run: calls=%d err=%v", calls, err)
	}
	// Malformed packed payloads are errors.
	for _, bad := range [][]byte{lenF(21, []byte{0x80}), lenF(27, []byte{1, 2, 3}), lenF(28, []byte{1})} {
		var e *Error
		p := mustPath(t, s.recordT, map[protowire.Number]string{21: "r_int32", 27: "r_fixed32", 28: "r_fixed64"}[protowire.Number(bad[0]>>3)])
		if err := p.Each(bad, func(Scalar) bool { return true }); !errors.As(err, &e) || e.Field != p.String() {
			t.Errorf("Each(%s, %x) = %v", p, bad, err)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// checkAgainstRuntime compares Get and Each at path with what a full decode
// (m, decoded from b) says.
func checkAgainstRuntime(t testing.TB, typ *Type, m protoreflect.Message, path string, b []byte) {
	t.Helper()
	p := mustPath(t, typ, path)
	fds := pathFields(typ.Descriptor(), path)
	if p.Field().Message() != nil {
		return
	}
	var want []Scalar
	refEach(m, fds, func(s Scalar) { want = append(want, s) })
	var got []Scalar
	if err := p.Each(b, func(s Scalar) bool { got = append(got, s); return true }); err != nil {
		t.Fatalf("Each(%s): %v", path, err)
	}
	viaMap := false
	for _, fd := range fds {
		viaMap = viaMap || fd.IsMap()
	}
	if viaMap {
		// Map order is unspecified (and Each visits duplicate keys as
		// encoded), so only compare when the encoding has no duplicates.
		if len(got) == len(want) {
			key := func(s Scalar) string { return s.String() }
			g, w := make([]string, len(got)), make([]string, len(want))
			for i := range got {
				g[i], w[i] = key(got[i]), key(want[i])
			}
			if !slices.Equal(sorted(g), sorted(w)) {
				t.Errorf("Each(%s) = %v, runtime says %v", path, got, want)
			}
		}
	} else if !slices.EqualFunc(got, want, scalarEqual) {
		t.Errorf("Each(%s) = %v, runtime says %v", path, got, want)
	}

	v, found, err := p.Get(b)
	if p.getErr != nil {
		if err == nil {
			t.Errorf("Get(%s) succeeded on a repeated path", path)
		}
		return
	}
	if err != nil {
		t.Fatalf("Get(%s): %v", path, err)
	}
	if len(want) != 1 || !scalarEqual(v, want[0]) {
		t.Errorf("Get(%s) = %v, runtime says %v", path, v, want)
	}
	if wantFound, ok := refFound(m, fds); ok && found != wantFound {
		t.Errorf("Get(%s) found=%v, runtime says %v", path, found, wantFound)
	}
}

// TestPathsAgainstRuntime runs every path of the schemas over several
// records, including merged (concatenated) ones, and compares with dynamicpb.
func TestPathsAgainstRuntime(t *testing.T) {
	s := loadSchema(t)
	full := marshal(t, fullRecord(s))
	bench := benchRecord(t, s)
	oneofMix := cat(lenF(66, str(1, "x"), lenF(4, str(3, "l1"))), str(65, "s"), lenF(66, str(2, "y")))
	records := map[string][]byte{
		"empty":       nil,
		"full":        full,
		"bench":       bench,
		"full+bench":  cat(full, bench),
		"bench+full":  cat(bench, full),
		"oneof mix":   oneofMix,
		"full+oneof":  cat(full, oneofMix),
		"tree merges": cat(lenF(61, marshal(t, tree(s.node, 2))), lenF(61, lenF(2, str(1, "renamed")))),
	}
	for name, b := range records {
		if err := s.recordT.Validate(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m := dynamicpb.NewMessage(s.record)
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		for _, path := range allPaths(s.record) {
			checkAgainstRuntime(t, s.recordT, m, path, b)
		}
	}
	leg := marshal(t, fullLegacy(s))
	for _, b := range [][]byte{vint(1, 1), leg, cat(leg, leg), cat(leg, vint(1, 2), group(4, vint(6, 9)))} {
		m := dynamicpb.NewMessage(s.legacy)
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		for _, path := range allPaths(s.legacy) {
			checkAgainstRuntime(t, s.legacyT, m, path, b)
		}
	}
}

func TestAppendFields(t *testing.T) {
	s := loadSchema(t)
	m := fullRecord(s)
	b := marshal(t, m)
	keep := []protowire.Number{1, 14, 60, 64, 100000}
	prefix := []byte("prefix")
	got := AppendFields(slices.Clone(prefix), b, keep)
	if !bytes.HasPrefix(got, prefix) {
		t.Fatal("dst prefix lost")
	}
	got = got[len(prefix):]
	if err := s.recordT.Validate(got); err != nil {
		t.Fatalf("projection is not a valid record: %v", err)
	}
	want := dynamicpb.NewMessage(s.record)
	for _, n := range keep {
		fd := s.record.Fields().ByNumber(n)
		want.Set(fd, m.Get(fd))
	}
	gotM := dynamicpb.NewMessage(s.record)
	if err := proto.Unmarshal(got, gotM); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(gotM, want) {
		t.Errorf("projection decodes to %v, want %v", gotM, want)
	}
	// Bytes are copied verbatim and in order, repeated occurrences included.
	raw := cat(vint(1, 1), str(14, "a"), []byte{0x88, 0x80, 0x00, 0x05}, group(99), vint(2, 7), lenF(60))
	if got := AppendFields(nil, raw, []protowire.Number{1, 60}); !bytes.Equal(got, cat(vint(1, 1), []byte{0x88, 0x80, 0x00, 0x05}, lenF(60))) {
		t.Errorf("AppendFields = %x", got)
	}
	if got := AppendFields(nil, raw, []protowire.Number{99}); !bytes.Equal(got, group(99)) {
		t.Errorf("AppendFields(group) = %x", got)
	}
	if got := AppendFields(nil, raw, nil); len(got) != 0 {
		t.Errorf("AppendFields(no numbers) = %x", got)
	}
	// Malformed input: stop at the first unparsable field.
	if got := AppendFields(nil, cat(vint(1, 1), []byte{0x12, 9}, vint(1, 2)), []protowire.Number{1}); !bytes.Equal(got, vint(1, 1)) {
		t.Errorf("AppendFields(malformed) = %x", got)
	}
}
