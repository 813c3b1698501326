package record

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

func TestValidateValid(t *testing.T) {
	s := loadSchema(t)
	rec := marshal(t, fullRecord(s))
	leg := marshal(t, fullLegacy(s))
	nodeBytes := marshal(t, tree(s.node, 6))
	tests := []struct {
		name string
		typ  *Type
		b    []byte
	}{
		{"empty record", s.recordT, nil},
		{"full record", s.recordT, rec},
		{"record concatenated with itself", s.recordT, append(append([]byte(nil), rec...), rec...)},
		{"full legacy", s.legacyT, leg},
		{"recursive node", s.nodeT, nodeBytes},
		{"legacy minimal", s.legacyT, vint(1, 5)},
		{"sparse field number", s.recordT, vint(100000, 1)},
		{"packed and unpacked mixed", s.recordT, cat(
			lenF(21, []byte{1, 0x80, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}),
			vint(21, 3), lenF(21), vint(41, 4), lenF(41, []byte{5}),
			lenF(27, []byte{1, 2, 3, 4, 5, 6, 7, 8}), fix32(27, 9), lenF(28, make([]byte, 16)), fix64(28, 1))},
		{"map entry without key or value", s.recordT, cat(lenF(62), lenF(63))},
		{"non-minimal tag varint", s.recordT, []byte{0x88, 0x80, 0x80, 0x00, 0x01}},
		{"oneof members repeated", s.recordT, cat(str(65, "a"), vint(67, 1), lenF(66, str(1, "x")))},
		{"group with nested group in child", s.legacyT, cat(vint(1, 1), lenF(14, vint(1, 2), group(4, str(5, "n"))), group(4), group(7, str(8, "k")))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.typ.Validate(tc.b); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			// The oracle must agree that these are clean encodings.
			m := dynamicpb.NewMessage(tc.typ.Descriptor())
			if err := proto.Unmarshal(tc.b, m); err != nil {
				t.Fatalf("proto.Unmarshal: %v", err)
			}
			if p := unknownPath(m, ""); p != "" {
				t.Fatalf("unknown fields at %s", p)
			}
		})
	}
}

func deepNode(levels int) []byte {
	// levels nested Node messages via "left", innermost first.
	b := vint(4, 1)
	for i := 0; i < levels; i++ {
		b = lenF(2, b)
	}
	return b
}

func TestValidateErrors(t *testing.T) {
	s := loadSchema(t)
	bad := []byte("ok\xff")
	overflow := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}
	tests := []struct {
		name   string
		typ    *Type
		b      []byte
		field  string
		number protowire.Number
		offset int // -1: don't check
		reason string
	}{
		{"unknown top-level field", s.recordT, cat(vint(1, 1), vint(99, 1)), "", 99, 2, "unknown field number 99"},
		{"unknown nested field", s.recordT, lenF(60, str(1, "x"), vint(7, 1)), "address", 7, 6, "unknown field number 7"},
		{"unknown field in map entry", s.recordT, lenF(62, str(1, "k"), vint(3, 1)), "labels", 3, -1, "unknown field number 3"},
		{"extension number", s.legacyT, cat(vint(1, 1), vint(150, 1)), "", 150, -1, "unknown field number 150"},
		{"varint as bytes", s.recordT, str(1, "x"), "f_int32", 1, 0, "wire type bytes, want varint"},
		{"string as varint", s.recordT, vint(14, 1), "f_string", 14, 0, "wire type varint, want bytes"},
		{"fixed32 as fixed64", s.recordT, fix64(7, 1), "f_fixed32", 7, 0, "wire type fixed64, want fixed32"},
		{"double as fixed32", s.recordT, fix32(12, 1), "f_double", 12, 0, "wire type fixed32, want fixed64"},
		{"message as varint", s.recordT, vint(60, 1), "address", 60, -1, "wire type varint, want bytes"},
		{"message as group", s.recordT, group(60), "address", 60, -1, "wire type start-group, want bytes"},
		{"repeated string packed-like varint", s.recordT, vint(34, 1), "r_string", 34, -1, "wire type varint, want bytes"},
		{"reserved wire type 6", s.recordT, tagB(1, 6), "f_int32", 1, 0, "wire type 6, want varint"},
		{"wrong wire type in sparse field", s.recordT, fix32(100000, 1), "big_number", 100000, 0, "wire type fixed32, want varint"},
		{"invalid UTF-8 top level", s.recordT, cat(vint(1, 1), lenF(14, bad)), "f_string", 14, 3, "invalid UTF-8"},
		{"invalid UTF-8 repeated", s.recordT, cat(str(34, "a"), lenF(34, bad)), "r_string", 34, -1, "invalid UTF-8"},
		{"invalid UTF-8 nested", s.recordT, lenF(60, lenF(1, bad)), "address.city", 1, 4, "invalid UTF-8"},
		{"invalid UTF-8 two levels", s.recordT, lenF(60, lenF(4, lenF(3, bad))), "address.geo.labels", 3, -1, "invalid UTF-8"},
		{"invalid UTF-8 map key", s.recordT, lenF(62, lenF(1, bad), str(2, "v")), "labels.key", 1, -1, "invalid UTF-8"},
		{"invalid UTF-8 map value", s.recordT, lenF(62, str(1, "k"), lenF(2, bad)), "labels.value", 2, -1, "invalid UTF-8"},
		{"invalid UTF-8 in map message value", s.recordT, lenF(63, vint(1, 1), lenF(2, lenF(1, bad))), "items_by_id.value.sku", 1, -1, "invalid UTF-8"},
		{"invalid UTF-8 proto2", s.legacyT, cat(vint(1, 1), lenF(2, bad)), "name", 2, -1, "invalid UTF-8"},
		{"invalid UTF-8 in group", s.legacyT, cat(vint(1, 1), group(4, lenF(5, bad))), "info.note", 5, -1, "invalid UTF-8"},
		{"bytes field accepts non-UTF-8", s.recordT, cat(lenF(15, bad), vint(99, 0)), "", 99, -1, "unknown field number 99"},
		{"packed fixed32 bad length", s.recordT, lenF(27, []byte{1, 2, 3}), "r_fixed32", 27, -1, "packed fixed32 length 3 is not a multiple of 4"},
		{"packed float bad length", s.recordT, lenF(31, make([]byte, 5)), "r_float", 31, -1, "packed fixed32 length 5 is not a multiple of 4"},
		{"packed fixed64 bad length", s.recordT, lenF(28, make([]byte, 12)), "r_fixed64", 28, -1, "packed fixed64 length 12 is not a multiple of 8"},
		{"packed truncated varint", s.recordT, lenF(21, []byte{1, 0x80}), "r_int32", 21, -1, "truncated packed varint"},
		{"packed overflowing varint", s.recordT, lenF(22, overflow), "r_int64", 22, -1, "packed varint overflows 64 bits"},
		{"packed into unpacked-declared field", s.recordT, lenF(41, []byte{0x80}), "u_int32", 41, -1, "truncated packed varint"},
		{"packed singular field", s.recordT, lenF(2, []byte{1}), "f_int64", 2, 0, "wire type bytes, want varint"},
		{"truncated tag", s.recordT, []byte{0x80}, "", 0, 0, "truncated tag"},
		{"truncated tag after field", s.recordT, cat(vint(1, 1), []byte{0xf8}), "", 0, 2, "truncated tag"},
		{"overflowing tag", s.recordT, overflow, "", 0, 0, "invalid tag varint"},
		{"field number zero", s.recordT, []byte{0x00, 0x00}, "", 0, 0, "invalid field number 0"},
		{"field number too large", s.recordT, protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), "", 0, 0, "invalid field number 536870912"},
		{"truncated varint", s.recordT, []byte{0x08, 0x80}, "f_int32", 1, 1, "truncated varint"},
		{"overflowing varint", s.recordT, cat(tagB(2, 0), overflow), "f_int64", 2, 1, "varint overflows 64 bits"},
		{"truncated fixed32", s.recordT, cat(tagB(9, protowire.Fixed32Type), []byte{1, 2}), "f_sfixed32", 9, 1, "truncated fixed32 value"},
		{"truncated fixed64", s.recordT, cat(tagB(10, protowire.Fixed64Type), []byte{1}), "f_sfixed64", 10, 1, "truncated fixed64 value"},
		{"truncated string", s.recordT, cat(tagB(14, 2), []byte{5, 'a'}), "f_string", 14, 1, "truncated length-delimited value"},
		{"truncated length prefix", s.recordT, cat(tagB(15, 2), []byte{0x80}), "f_bytes", 15, 1, "truncated length-delimited value"},
		{"huge length", s.recordT, cat(tagB(15, 2), protowire.AppendVarint(nil, 1<<62)), "f_bytes", 15, 1, "truncated length-delimited value"},
		{"truncated repeated message", s.recordT, cat(lenF(64, str(1, "a")), tagB(64, 2), []byte{9, 1}), "items", 64, -1, "truncated length-delimited value"},
		{"truncation inside nested message", s.recordT, lenF(64, tagB(1, 2), []byte{3, 'a'}), "items.sku", 1, -1, "truncated length-delimited value"},
		{"stray end-group", s.recordT, tagB(1, protowire.EndGroupType), "", 1, 0, "unexpected end-group tag"},
		{"end-group inside message", s.legacyT, cat(vint(1, 1), lenF(14, vint(1, 1), tagB(14, protowire.EndGroupType))), "child", 14, -1, "unexpected end-group tag"},
		{"mismatched end-group", s.legacyT, cat(vint(1, 1), tagB(4, 3), str(5, "x"), tagB(7, 4)), "info", 7, -1, "end-group tag for field 7 does not match start-group for field 4"},
		{"missing end-group", s.legacyT, cat(vint(1, 1), tagB(4, 3), str(5, "x")), "info", 4, -1, "truncated group: missing end-group tag"},
		{"group as bytes", s.legacyT, cat(vint(1, 1), lenF(4)), "info", 4, -1, "wire type bytes, want start-group"},
		{"unknown field in group", s.legacyT, cat(vint(1, 1), group(4, vint(1, 1))), "info", 1, -1, "unknown field number 1"},
		{"missing required", s.legacyT, str(2, "x"), "id", 1, 3, "missing required field"},
		{"missing required in repeated group", s.legacyT, cat(vint(1, 1), group(7, str(8, "k")), group(7, lenF(9))), "entry.key", 8, -1, "missing required field"},
		{"missing required in child", s.legacyT, cat(vint(1, 1), lenF(14, str(2, "x"))), "child.id", 1, -1, "missing required field"},
		{"missing required in map value", s.legacyT, cat(vint(1, 1), lenF(19, str(1, "k"), lenF(2))), "reqs.value.x", 1, -1, "missing required field"},
		{"missing map value with required fields", s.legacyT, cat(vint(1, 1), lenF(19, str(1, "k"))), "reqs.value", 2, -1, "missing map value (its type has required fields)"},
		// proto.Unmarshal panics on this one (protobuf-go v1.36.12 keeps the
		// nil key of the mistyped second occurrence).
		{"repeated map key with wrong wire type", s.legacyT, cat(vint(1, 1), lenF(19, str(1, "a"), vint(1, 5), lenF(2, vint(1, 1)))), "reqs.key", 1, -1, "wire type varint, want bytes"},
		{"nesting deeper than MaxDepth", s.nodeT, deepNode(MaxDepth + 1), strings.TrimSuffix(strings.Repeat("left.", MaxDepth+1), "."), 2, -1, "nesting deeper than 64"},
		{"groups count toward depth", s.legacyT, func() []byte {
			b := cat(vint(1, 1), group(4))
			for i := 0; i < MaxDepth; i++ {
				b = cat(vint(1, 1), lenF(14, b))
			}
			return b
		}(), strings.Repeat("child.", MaxDepth) + "info", 4, -1, "nesting deeper than 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.typ.Validate(tc.b)
			if err == nil {
				t.Fatalf("Validate(%x) = nil, want %q", tc.b, tc.reason)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error", err)
			}
			field := tc.field
			if e.Field != field || e.Number != tc.number || e.Reason != tc.reason || (tc.offset >= 0 && e.Offset != tc.offset) {
				t.Errorf("got  {Field:%q Number:%d Offset:%d Reason:%q}\nwant {Field:%q Number:%d Offset:%d Reason:%q}",
					e.Field, e.Number, e.Offset, e.Reason, field, tc.number, tc.offset, tc.reason)
			}
			if e.Offset < 0 || e.Offset > len(tc.b) {
				t.Errorf("Offset %d outside record of %d bytes", e.Offset, len(tc.b))
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.reason) || (e.Field != "" && !strings.Contains(msg, "field "+e.Field+": ")) {
				t.Errorf("Error() = %q", msg)
			}
			// Whatever Validate rejects must be either invalid for the runtime
			// too, or carry unknown fields, or break a rule Validate adds.
			if m, uerr := unmarshal(tc.typ.Descriptor(), tc.b); uerr == nil && unknownPath(m, "") == "" {
				switch {
				case strings.Contains(tc.reason, "UTF-8") && tc.typ == s.legacyT,
					strings.Contains(tc.reason, "nesting"),
					strings.Contains(tc.name, "map entry"):
				default:
					t.Errorf("proto.Unmarshal accepts this cleanly; Validate should too")
				}
			}
		})
	}
}

func TestValidateDepthLimit(t *testing.T) {
	s := loadSchema(t)
	// The top-level message is depth 0, so MaxDepth nested messages fit.
	if err := s.nodeT.Validate(deepNode(MaxDepth)); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	if err := s.nodeT.Validate(deepNode(MaxDepth + 1)); err == nil {
		t.Fatalf("depth %d accepted", MaxDepth+1)
	}
	// Map entries are messages on the wire and count too: Record(0) >
	// items_by_id entry(1) > Item(2) > Address(3) > Geo(4).
	b := lenF(63, lenF(2, lenF(4, lenF(4, str(3, "x")))))
	if err := s.recordT.Validate(b); err != nil {
		t.Fatal(err)
	}
}

// TestValidatePrefixes checks every truncation of valid records against the
// runtime's verdict: a prefix either fails both or is a valid shorter record.
func TestValidatePrefixes(t *testing.T) {
	s := loadSchema(t)
	cases := []struct {
		typ *Type
		b   []byte
	}{
		{s.recordT, marshal(t, fullRecord(s))},
		{s.legacyT, marshal(t, fullLegacy(s))},
		{s.nodeT, marshal(t, tree(s.node, 3))},
	}
	for _, c := range cases {
		name := string(c.typ.Descriptor().Name())
		accepted := 0
		for n := 0; n <= len(c.b); n++ {
			p := c.b[:n:n]
			verr := c.typ.Validate(p)
			m := dynamicpb.NewMessage(c.typ.Descriptor())
			uerr := proto.Unmarshal(p, m)
			clean := uerr == nil && unknownPath(m, "") == ""
			if (verr == nil) != clean {
				t.Fatalf("%s prefix %d/%d: Validate=%v, Unmarshal=%v unknown=%q", name, n, len(c.b), verr, uerr, unknownPath(m, ""))
			}
			if verr == nil {
				accepted++
			}
		}
		if accepted < 2 {
			t.Errorf("%s: only %d prefixes accepted; expected field boundaries to be", name, accepted)
		}
	}
}

func TestValidateAllocs(t *testing.T) {
	s := loadSchema(t)
	b := benchRecord(t, s)
	if len(b) < 150 || len(b) > 260 {
		t.Fatalf("bench record is %d bytes, want about 200", len(b))
	}
	for name, c := range map[string]struct {
		typ *Type
		b   []byte
	}{
		"record-200B": {s.recordT, b},
		"legacy":      {s.legacyT, marshal(t, fullLegacy(s))},
		"full":        {s.recordT, marshal(t, fullRecord(s))},
	} {
		if err := c.typ.Validate(c.b); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(200, func() { _ = c.typ.Validate(c.b) }); n != 0 {
			t.Errorf("%s: Validate allocates %v times per run", name, n)
		}
	}
}

// benchRecord is a realistic ~200-byte record: scalars, a nested message,
// a packed list, a map and repeated messages.
func benchRecord(tb testing.TB, s *schema) []byte {
	md := s.record
	m := dynamicpb.NewMessage(md)
	m.Set(field(md, "f_int32"), protoreflect.ValueOfInt32(42))
	m.Set(field(md, "f_int64"), protoreflect.ValueOfInt64(1700000000123))
	m.Set(field(md, "f_string"), protoreflect.ValueOfString("ada.lovelace@example.com"))
	m.Set(field(md, "f_bool"), protoreflect.ValueOfBool(true))
	m.Set(field(md, "f_double"), protoreflect.ValueOfFloat64(99.5))
	m.Set(field(md, "f_enum"), protoreflect.ValueOfEnum(2))
	m.Set(field(md, "address"), protoreflect.ValueOfMessage(newAddress(s.address, "London", "NW1 6XE", 221)))
	l := m.Mutable(field(md, "r_int32")).List()
	for i := int32(0); i < 10; i++ {
		l.Append(protoreflect.ValueOfInt32(i * 300))
	}
	labels := m.Mutable(field(md, "labels")).Map()
	labels.Set(protoreflect.ValueOfString("team").MapKey(), protoreflect.ValueOfString("analytics"))
	labels.Set(protoreflect.ValueOfString("tier").MapKey(), protoreflect.ValueOfString("gold"))
	items := m.Mutable(field(md, "items")).List()
	for j := 0; j < 2; j++ {
		it := dynamicpb.NewMessage(field(md, "items").Message())
		it.Set(field(it.Descriptor(), "sku"), protoreflect.ValueOfString("SKU-000"+string(rune('1'+j))))
		it.Set(field(it.Descriptor(), "qty"), protoreflect.ValueOfInt32(int32(j+1)))
		items.Append(protoreflect.ValueOfMessage(it))
	}
	return marshal(tb, m)
}

func TestValidateConcurrent(t *testing.T) {
	s := loadSchema(t)
	good := marshal(t, fullRecord(s))
	badB := append(append([]byte(nil), good...), vint(99, 1)...)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if err := s.recordT.Validate(good); err != nil {
					t.Error(err)
					return
				}
				if err := s.recordT.Validate(badB); err == nil {
					t.Error("accepted unknown field")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestCompile(t *testing.T) {
	s := loadSchema(t)
	if _, err := Compile(nil); err == nil {
		t.Error("Compile(nil) succeeded")
	}
	if s.recordT.Descriptor() != s.record {
		t.Error("Descriptor() is not the compiled descriptor")
	}
	// Recursive types share one table rather than unrolling.
	n := s.nodeT.root
	if n.lookup(2).msg != n || n.lookup(3).msg != n {
		t.Error("recursive Node fields do not point back at Node's table")
	}
	e := &Error{Field: "address.city", Number: 1, Offset: 12, Reason: "invalid UTF-8"}
	if got, want := e.Error(), "record: field address.city: invalid UTF-8 at offset 12"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &Error{Number: 7, Offset: 3, Reason: "unknown field number 7"}
	if got, want := e.Error(), "record: unknown field number 7 at offset 3"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
