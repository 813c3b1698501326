package record

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

func mustPatch(t testing.TB, typ *Type, fields, add []string) *Patch {
	t.Helper()
	p, err := typ.CompilePatch(fields, add, []string{"f_string"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// twos is v's two's complement, as an int64 field's varint carries it.
func twos(v int64) uint64 { return uint64(v) }

func TestCompilePatchRefuses(t *testing.T) {
	s := loadSchema(t)
	for _, c := range []struct {
		fields, add []string
		field, want string
	}{
		{nil, nil, "", "names no field"},
		{[]string{"nope"}, nil, "nope", `message test.Record has no field "nope"`},
		{[]string{"address.nope"}, nil, "address.nope", `message test.Address has no field "nope"`},
		{[]string{"f_int32.x"}, nil, "f_int32.x", `field "f_int32" is a int32, not a message`},
		{[]string{"address..city"}, nil, "address..city", "empty path segment"},
		{[]string{""}, nil, "", "empty path segment"},
		{[]string{"items.sku"}, nil, "items.sku", `field "items" is repeated`},
		{[]string{"items_by_id.value"}, nil, "items_by_id.value", `field "items_by_id" is a map`},
		{nil, []string{"f_string"}, "f_string", "add takes a numeric field; this one is a string"},
		{nil, []string{"f_bool"}, "f_bool", "this one is a bool"},
		{nil, []string{"f_enum"}, "f_enum", "this one is a enum"},
		{nil, []string{"address"}, "address", "this one is a message"},
		{nil, []string{"r_int32"}, "r_int32", "this one is repeated"},
		{[]string{"f_int32", "f_int32"}, nil, "f_int32", "named twice"},
		{[]string{"f_int32"}, []string{"f_int32"}, "f_int32", "named in both fields and add"},
		{[]string{"address", "address.city"}, nil, "address.city", "inside address, which the patch also names"},
		{[]string{"address.geo.lat", "address.geo"}, nil, "address.geo", "holds fields the patch also names"},
		{[]string{"address.number"}, []string{"address.number"}, "address.number", "named in both fields and add"},
		{[]string{"f_string"}, nil, "f_string", "holds the primary key"},
	} {
		_, err := s.recordT.CompilePatch(c.fields, c.add, []string{"f_string"})
		var pe *PatchError
		if !errors.As(err, &pe) {
			t.Errorf("fields %q add %q: error %v, want a *PatchError", c.fields, c.add, err)
			continue
		}
		if pe.Field != c.field || !strings.Contains(pe.Reason, c.want) || pe.Overflow {
			t.Errorf("fields %q add %q: %+v, want field %q and %q", c.fields, c.add, pe, c.field, c.want)
		}
	}
	// A nested key: its message is part of the key too.
	_, err := s.recordT.CompilePatch([]string{"address"}, nil, []string{"address.zip"})
	if pe := (*PatchError)(nil); !errors.As(err, &pe) || pe.Field != "address" || !strings.Contains(pe.Reason, "address.zip") {
		t.Errorf("patch of a message holding the key: %v", err)
	}
}

// TestPatchApply checks the wire result of patches exactly, beyond what
// decodes the same.
func TestPatchApply(t *testing.T) {
	s := loadSchema(t)
	unknown := vint(99, 5)
	for _, c := range []struct {
		name        string
		fields, add []string
		stored, rec []byte
		want        []byte
	}{
		{"set keeps the rest verbatim", []string{"f_int32"}, nil,
			cat(vint(1, 1), str(14, "k"), vint(2, 9), vint(1, 3)), cat(str(14, "k"), vint(1, 4)),
			cat(str(14, "k"), vint(2, 9), vint(1, 4))},
		{"a field the record lacks is cleared", []string{"f_int32", "f_int64"}, nil,
			cat(vint(1, 1), vint(2, 9)), cat(str(14, "k"), vint(2, 8)),
			vint(2, 8)},
		{"unknown fields are kept", []string{"f_int32"}, nil,
			cat(unknown, vint(1, 1), lenF(60, str(1, "x"), unknown)), vint(1, 2),
			cat(unknown, lenF(60, str(1, "x"), unknown), vint(1, 2))},
		{"nested: occurrences merge, the rest of the message is kept", []string{"address.city"}, nil,
			cat(lenF(60, str(1, "a"), unknown), vint(2, 1), lenF(60, str(2, "z"), str(1, "b"))), lenF(60, str(1, "c")),
			cat(vint(2, 1), lenF(60, unknown, str(2, "z"), str(1, "c")))},
		{"nested: the record lacks the message, the stored field is cleared", []string{"address.city"}, nil,
			cat(lenF(60, str(1, "a"), str(2, "z"))), vint(1, 7),
			lenF(60, str(2, "z"))},
		{"nested: neither holds the message", []string{"address.city"}, nil,
			vint(1, 1), vint(1, 7),
			vint(1, 1)},
		{"nested two levels", []string{"address.geo.lat", "address.zip"}, nil,
			lenF(60, str(1, "a"), lenF(4, fix64(1, 1), fix64(2, 2))), lenF(60, str(2, "z"), lenF(4, fix64(1, 9))),
			lenF(60, str(1, "a"), str(2, "z"), lenF(4, fix64(2, 2), fix64(1, 9)))},
		{"a repeated field is replaced whole", []string{"r_int32"}, nil,
			cat(lenF(21, []byte{1, 2}), vint(1, 1), vint(21, 3)), cat(vint(21, 4), lenF(21, []byte{5})),
			cat(vint(1, 1), vint(21, 4), lenF(21, []byte{5}))},
		{"a map is replaced whole", []string{"labels"}, nil,
			cat(lenF(62, str(1, "a"), str(2, "b")), vint(1, 1)), lenF(62, str(1, "c"), str(2, "d")),
			cat(vint(1, 1), lenF(62, str(1, "c"), str(2, "d")))},
		{"add: the last stored occurrence is the stored value", nil, []string{"f_int32"},
			cat(vint(1, 100), str(14, "k"), vint(1, 7)), vint(1, 2),
			cat(str(14, "k"), vint(1, 9))},
		{"add: an absent stored value counts as 0", nil, []string{"f_sint64"},
			str(14, "k"), vint(6, protowire.EncodeZigZag(-3)),
			cat(str(14, "k"), vint(6, protowire.EncodeZigZag(-3)))},
		{"add: a zero sum of a field without presence is not written", nil, []string{"f_int64"},
			vint(2, 5), vint(2, twos(-5)),
			nil},
		{"add: an optional field is written even when zero", nil, []string{"opt_int"},
			vint(68, 0), nil,
			vint(68, 0)},
		{"add: neither side holds an optional field", nil, []string{"opt_int"},
			vint(1, 1), nil,
			vint(1, 1)},
		{"oneof: the record's member replaces the stored one", []string{"choice_str"}, nil,
			cat(vint(67, 5), vint(1, 1)), str(65, "s"),
			cat(vint(1, 1), str(65, "s"))},
		{"oneof: a named member the record lacks is cleared", []string{"choice_int"}, nil,
			cat(vint(67, 5), vint(1, 1)), str(65, "s"),
			vint(1, 1)},
		{"oneof: an unnamed live member is kept", []string{"choice_int"}, nil,
			cat(vint(67, 5), str(65, "t"), vint(1, 1)), str(65, "s"),
			cat(vint(67, 5), str(65, "t"), vint(1, 1))},
		{"oneof: only the record's live run counts", []string{"choice_addr"}, nil,
			vint(1, 1), cat(lenF(66, str(1, "dead")), str(65, "s"), lenF(66, str(2, "live"))),
			cat(vint(1, 1), lenF(66, str(2, "live")))},
		{"oneof: a path into the member", []string{"choice_addr.city"}, nil,
			cat(lenF(66, str(2, "z")), vint(67, 1)), lenF(66, str(1, "c")),
			lenF(66, str(1, "c"))},
	} {
		p := mustPatch(t, s.recordT, c.fields, c.add)
		got, err := p.Apply([]byte{0xee}, c.stored, c.rec)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if want := cat([]byte{0xee}, c.want); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", c.name, got, want)
		}
		checkPatchOracle(t, s.recordT, p, c.fields, c.add, c.stored, c.rec)
	}
}

func TestPatchApplyGroup(t *testing.T) {
	s := loadSchema(t)
	stored := cat(vint(1, 1), group(4, str(5, "old"), vint(6, 3)), group(4, vint(6, 4)))
	rec := cat(vint(1, 1), group(4, str(5, "new")))
	p := mustPatch(t, s.legacyT, []string{"info.note"}, []string{"info.rank"})
	got, err := p.Apply(nil, stored, rec)
	if err != nil {
		t.Fatal(err)
	}
	if want := cat(vint(1, 1), group(4, str(5, "new"), vint(6, 4))); !bytes.Equal(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
	checkPatchOracle(t, s.legacyT, p, []string{"info.note"}, []string{"info.rank"}, stored, rec)
}

func TestPatchRequired(t *testing.T) {
	s := loadSchema(t)
	p := mustPatch(t, s.legacyT, []string{"child.id"}, nil)
	stored := cat(vint(1, 1), lenF(14, vint(1, 2)))
	_, err := p.Apply(nil, stored, vint(1, 1))
	var pe *PatchError
	if !errors.As(err, &pe) || pe.Field != "child.id" || pe.Overflow {
		t.Fatalf("clearing a required field: %v", err)
	}
	// With the child in the record, the field is set.
	if _, err := p.Apply(nil, stored, cat(vint(1, 1), lenF(14, vint(1, 3)))); err != nil {
		t.Fatal(err)
	}
}

// TestPatchAddKinds adds to every numeric kind: in range, and one past
// each bound of the field's own width.
func TestPatchAddKinds(t *testing.T) {
	s := loadSchema(t)
	md := s.record
	for _, c := range []struct {
		field    string
		a, b     protoreflect.Value
		overflow bool
	}{
		{"f_int32", protoreflect.ValueOfInt32(math.MaxInt32 - 1), protoreflect.ValueOfInt32(1), false},
		{"f_int32", protoreflect.ValueOfInt32(math.MaxInt32), protoreflect.ValueOfInt32(1), true},
		{"f_int32", protoreflect.ValueOfInt32(math.MinInt32), protoreflect.ValueOfInt32(-1), true},
		{"f_sint32", protoreflect.ValueOfInt32(-5), protoreflect.ValueOfInt32(3), false},
		{"f_sint32", protoreflect.ValueOfInt32(math.MinInt32), protoreflect.ValueOfInt32(-1), true},
		{"f_sfixed32", protoreflect.ValueOfInt32(math.MaxInt32), protoreflect.ValueOfInt32(1), true},
		{"f_sfixed32", protoreflect.ValueOfInt32(-7), protoreflect.ValueOfInt32(7), false},
		{"f_int64", protoreflect.ValueOfInt64(math.MaxInt64), protoreflect.ValueOfInt64(1), true},
		{"f_int64", protoreflect.ValueOfInt64(math.MinInt64), protoreflect.ValueOfInt64(-1), true},
		{"f_int64", protoreflect.ValueOfInt64(math.MinInt64), protoreflect.ValueOfInt64(math.MaxInt64), false},
		{"f_sint64", protoreflect.ValueOfInt64(math.MinInt64 + 1), protoreflect.ValueOfInt64(-1), false},
		{"f_sfixed64", protoreflect.ValueOfInt64(math.MaxInt64), protoreflect.ValueOfInt64(1), true},
		{"f_uint32", protoreflect.ValueOfUint32(math.MaxUint32), protoreflect.ValueOfUint32(1), true},
		{"f_uint32", protoreflect.ValueOfUint32(math.MaxUint32 - 1), protoreflect.ValueOfUint32(1), false},
		{"f_fixed32", protoreflect.ValueOfUint32(math.MaxUint32), protoreflect.ValueOfUint32(1), true},
		{"f_uint64", protoreflect.ValueOfUint64(math.MaxUint64), protoreflect.ValueOfUint64(1), true},
		{"f_fixed64", protoreflect.ValueOfUint64(math.MaxUint64 - 2), protoreflect.ValueOfUint64(2), false},
		{"f_fixed64", protoreflect.ValueOfUint64(math.MaxUint64), protoreflect.ValueOfUint64(1), true},
		{"f_float", protoreflect.ValueOfFloat32(1.25), protoreflect.ValueOfFloat32(-3.5), false},
		{"f_float", protoreflect.ValueOfFloat32(3e38), protoreflect.ValueOfFloat32(3e38), false}, // +Inf: floats do not overflow
		{"f_double", protoreflect.ValueOfFloat64(0.1), protoreflect.ValueOfFloat64(0.2), false},
	} {
		fd := field(md, c.field)
		stored, rec := dynamicpb.NewMessage(md), dynamicpb.NewMessage(md)
		stored.Set(fd, c.a)
		rec.Set(fd, c.b)
		sb, rb := marshal(t, stored), marshal(t, rec)
		p := mustPatch(t, s.recordT, nil, []string{c.field})
		_, err := p.Apply(nil, sb, rb)
		var pe *PatchError
		if c.overflow {
			if !errors.As(err, &pe) || !pe.Overflow || pe.Field != c.field {
				t.Errorf("%s %v + %v: error %v, want an overflow naming the field", c.field, c.a, c.b, err)
			}
		} else if err != nil {
			t.Errorf("%s %v + %v: %v", c.field, c.a, c.b, err)
		}
		checkPatchOracle(t, s.recordT, p, nil, []string{c.field}, sb, rb)
	}
}

// TestPatchApplyMalformed feeds Apply stored bytes it cannot parse: an
// error, dst unchanged, no panic.
func TestPatchApplyMalformed(t *testing.T) {
	s := loadSchema(t)
	p := mustPatch(t, s.recordT, []string{"address.city", "f_int32"}, []string{"f_int64"})
	for _, stored := range [][]byte{
		{0x08},                      // truncated varint
		cat(lenF(60, []byte{0x0a})), // truncated string inside the message
		cat(fix32(2, 1)),            // add field with the wrong wire type
		cat(vint(60, 1)),            // message field with the wrong wire type
		{0x04},                      // stray end-group tag
	} {
		out, err := p.Apply([]byte("x"), stored, vint(1, 1))
		if err == nil || string(out) != "x" {
			t.Errorf("stored %x: %q, %v; want an error and dst unchanged", stored, out, err)
		}
	}
}

// TestPatchApplyAllocs holds Apply to no allocations once dst has room,
// nested paths included.
func TestPatchApplyAllocs(t *testing.T) {
	s := loadSchema(t)
	stored := marshal(t, fullRecord(s))
	rec := benchRecord(t, s)
	p := mustPatch(t, s.recordT, []string{"f_int32", "address.city", "address.geo.lat", "r_int32"}, []string{"f_int64", "address.number"})
	dst := make([]byte, 0, 4*len(stored))
	if _, err := p.Apply(dst, stored, rec); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := p.Apply(dst, stored, rec); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Apply allocates %v times per call", n)
	}
}

func BenchmarkPatchApply(b *testing.B) {
	s := loadSchema(b)
	stored := benchRecord(b, s)
	for _, c := range []struct {
		name        string
		fields, add []string
	}{
		{"set", []string{"f_int32"}, nil},
		{"add", nil, []string{"f_int64"}},
		{"nested", []string{"address.city"}, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := mustPatch(b, s.recordT, c.fields, c.add)
			dst := make([]byte, 0, 2*len(stored))
			b.SetBytes(int64(len(stored)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Apply(dst, stored, stored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPatchApplyStoredInDst patches a record that lies in dst before its
// length, as the engine does when a batch patches one key twice.
func TestPatchApplyStoredInDst(t *testing.T) {
	s := loadSchema(t)
	stored := marshal(t, fullRecord(s))
	rec := benchRecord(t, s)
	p := mustPatch(t, s.recordT, []string{"address.city", "choice_addr.zip"}, []string{"f_int64"})
	want, err := p.Apply(nil, stored, rec)
	if err != nil {
		t.Fatal(err)
	}
	buf := append(make([]byte, 0, 4*len(stored)), stored...)
	got, err := p.Apply(buf, buf, rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(stored)], stored) || !bytes.Equal(got[len(stored):], want) {
		t.Fatalf("patching the bytes before dst's length: got %x, want %x after them", got[len(stored):], want)
	}
}
