package record

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

func addSeeds(f *testing.F, s *schema) {
	f.Add([]byte{})
	f.Add(marshal(f, fullRecord(s)))
	f.Add(benchRecord(f, s))
	f.Add(marshal(f, fullLegacy(s)))
	f.Add(marshal(f, tree(s.node, 3)))
	f.Add(cat(lenF(66, str(1, "x")), vint(67, 5), lenF(66, str(2, "y"))))
	f.Add(cat(vint(1, 1), group(4, str(5, "n")), group(7, str(8, "k"))))
	f.Add(cat(lenF(21, []byte{1, 0x80, 0x01}), lenF(27, make([]byte, 8))))
}

// FuzzValidate holds Validate to the runtime as oracle, on three schemas at
// once: whatever Validate accepts must unmarshal with no unknown fields
// anywhere, and whatever fails to unmarshal must be rejected. Validate may
// reject more (unknown fields, proto2 invalid UTF-8, depth), but a canonical
// re-encoding of a cleanly decoded message must pass unless one of Validate's
// extra rules applies.
func FuzzValidate(f *testing.F) {
	s := loadSchema(f)
	addSeeds(f, s)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range []*Type{s.recordT, s.legacyT, s.nodeT} {
			name := typ.Descriptor().FullName()
			verr := typ.Validate(data)
			if verr != nil {
				var e *Error
				if !errors.As(verr, &e) {
					t.Fatalf("%s: error %T is not *Error", name, verr)
				}
				if e.Offset < 0 || e.Offset > len(data) {
					t.Fatalf("%s: offset %d outside %d bytes: %v", name, e.Offset, len(data), verr)
				}
			}
			m, uerr := unmarshal(typ.Descriptor(), data)
			if verr == nil {
				if uerr != nil {
					t.Fatalf("%s: Validate accepted what proto.Unmarshal rejects: %v", name, uerr)
				}
				if p := unknownPath(m, ""); p != "" {
					t.Fatalf("%s: Validate accepted a record with unknown fields at %s", name, p)
				}
			}
			if uerr != nil || unknownPath(m, "") != "" {
				continue
			}
			canon, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatalf("%s: re-marshal: %v", name, err)
			}
			if cerr := typ.Validate(canon); cerr != nil {
				var re *Error
				if !errors.As(cerr, &re) {
					t.Fatalf("%s: Validate returned %T, want *Error", name, cerr)
				}
				reason := re.Reason
				proto2UTF8 := typ == s.legacyT && reason == "invalid UTF-8"
				if !proto2UTF8 && !strings.HasPrefix(reason, "nesting deeper") {
					t.Fatalf("%s: canonical encoding %x of a clean message rejected: %v", name, canon, cerr)
				}
			}
		}
	})
}

var fuzzPaths struct {
	record, legacy []*Path
}

// FuzzPathGet checks that Get and Each never panic on arbitrary bytes, and
// that on records Validate accepts they agree with a full decode.
func FuzzPathGet(f *testing.F) {
	s := loadSchema(f)
	addSeeds(f, s)
	compile := func(typ *Type) []*Path {
		var ps []*Path
		for _, path := range allPaths(typ.Descriptor()) {
			ps = append(ps, mustPath(f, typ, path))
		}
		return ps
	}
	fuzzPaths.record = compile(s.recordT)
	fuzzPaths.legacy = compile(s.legacyT)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range []struct {
			typ   *Type
			paths []*Path
		}{{s.recordT, fuzzPaths.record}, {s.legacyT, fuzzPaths.legacy}} {
			for _, p := range c.paths {
				_, _, _ = p.Get(data)
				n := 0
				_ = p.Each(data, func(Scalar) bool { n++; return n < 1000 })
			}
			if c.typ.Validate(data) != nil {
				continue
			}
			m, err := unmarshal(c.typ.Descriptor(), data)
			if err != nil {
				t.Fatalf("Validate accepted what Unmarshal rejects: %v", err)
			}
			for _, p := range c.paths {
				checkAgainstRuntime(t, c.typ, m, p.String(), data)
			}
		}
	})
}
