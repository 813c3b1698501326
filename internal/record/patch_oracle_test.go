package record

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The oracle: the same patch done with protoreflect on decoded messages.

// refPatch applies fields and add from src to dst, path by path.
func refPatch(dst, src protoreflect.Message, fields, add []string) error {
	for _, f := range fields {
		if err := refWalk(dst, src, pathFields(dst.Descriptor(), f), refSetLeaf); err != nil {
			return err
		}
	}
	for _, f := range add {
		if err := refWalk(dst, src, pathFields(dst.Descriptor(), f), refAddLeaf); err != nil {
			return err
		}
	}
	return nil
}

// refWalk goes down the path's messages: one the record holds is created
// in dst if need be, one only dst holds is patched with an empty record,
// one neither holds is left alone.
func refWalk(dst, src protoreflect.Message, fds []protoreflect.FieldDescriptor,
	leaf func(dst, src protoreflect.Message, fd protoreflect.FieldDescriptor) error) error {
	fd := fds[0]
	if len(fds) == 1 {
		return leaf(dst, src, fd)
	}
	switch {
	case src.Has(fd):
		return refWalk(dst.Mutable(fd).Message(), src.Get(fd).Message(), fds[1:], leaf)
	case dst.Has(fd):
		return refWalk(dst.Mutable(fd).Message(), dynamicpb.NewMessage(fd.Message()), fds[1:], leaf)
	}
	return nil
}

func refSetLeaf(dst, src protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	if src.Has(fd) {
		dst.Set(fd, src.Get(fd))
		return nil
	}
	if fd.Cardinality() == protoreflect.Required {
		return errors.New("clears required " + string(fd.Name()))
	}
	dst.Clear(fd)
	return nil
}

func refAddLeaf(dst, src protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	dh, sh := dst.Has(fd), src.Has(fd)
	if !dh && !sh {
		return nil
	}
	var a, b protoreflect.Value
	if dh {
		a = dst.Get(fd)
	}
	if sh {
		b = src.Get(fd)
	}
	v, err := refSum(fd.Kind(), a, b)
	if err != nil {
		return err
	}
	dst.Set(fd, v)
	return nil
}

// refSum adds two values of kind k (an invalid Value reads as 0), with
// the overflow checks written out against math/big-free bounds.
func refSum(k protoreflect.Kind, a, b protoreflect.Value) (protoreflect.Value, error) {
	ints := func(v protoreflect.Value) int64 {
		if !v.IsValid() {
			return 0
		}
		return v.Int()
	}
	uints := func(v protoreflect.Value) uint64 {
		if !v.IsValid() {
			return 0
		}
		return v.Uint()
	}
	floats := func(v protoreflect.Value) float64 {
		if !v.IsValid() {
			return 0
		}
		return v.Float()
	}
	over := errors.New("overflow")
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		s := ints(a) + ints(b) // cannot wrap in 64 bits
		if s < math.MinInt32 || s > math.MaxInt32 {
			return a, over
		}
		return protoreflect.ValueOfInt32(int32(s)), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		x, y := ints(a), ints(b)
		if (y > 0 && x > math.MaxInt64-y) || (y < 0 && x < math.MinInt64-y) {
			return a, over
		}
		return protoreflect.ValueOfInt64(x + y), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		s := uints(a) + uints(b)
		if s > math.MaxUint32 {
			return a, over
		}
		return protoreflect.ValueOfUint32(uint32(s)), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		x, y := uints(a), uints(b)
		if x > math.MaxUint64-y {
			return a, over
		}
		return protoreflect.ValueOfUint64(x + y), nil
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(floats(a)) + float32(floats(b))), nil
	}
	return protoreflect.ValueOfFloat64(floats(a) + floats(b)), nil
}

// checkPatchOracle applies the patch to stored with rec both ways and
// fails t when the results differ. stored must unmarshal and rec pass
// Validate.
func checkPatchOracle(t testing.TB, typ *Type, p *Patch, fields, add []string, stored, rec []byte) {
	t.Helper()
	md := typ.Descriptor()
	dst := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(stored, dst); err != nil {
		t.Fatalf("stored: %v", err)
	}
	src, err := unmarshal(md, rec)
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	werr := refPatch(dst, src, fields, add)
	out, gerr := p.Apply(nil, stored, rec)
	desc := fmt.Sprintf("fields %q add %q\nstored %x\nrecord %x", fields, add, stored, rec)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s\noracle error %v, Apply error %v", desc, werr, gerr)
	}
	if gerr != nil {
		var pe *PatchError
		if !errors.As(gerr, &pe) {
			t.Fatalf("%s\nApply error %T %v, want *PatchError", desc, gerr, gerr)
		}
		return
	}
	got := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(out, got); err != nil {
		t.Fatalf("%s\nresult %x does not unmarshal: %v", desc, out, err)
	}
	if !proto.Equal(got, dst) {
		t.Fatalf("%s\nresult %x\n got  %v\n want %v", desc, out, got, dst)
	}
}

// patchPaths lists the paths of md a patch may name: every field reached
// through singular message fields, to a bounded depth.
func patchPaths(md protoreflect.MessageDescriptor) (set, add []string) {
	var walk func(md protoreflect.MessageDescriptor, prefix string, depth int)
	walk = func(md protoreflect.MessageDescriptor, prefix string, depth int) {
		fds := md.Fields()
		for i := 0; i < fds.Len(); i++ {
			fd := fds.Get(i)
			p := prefix + string(fd.Name())
			set = append(set, p)
			if !fd.IsList() && !fd.IsMap() && numericKind(fd.Kind()) {
				add = append(add, p)
			}
			if fd.Message() != nil && !fd.IsList() && !fd.IsMap() && depth < 2 {
				walk(fd.Message(), p+".", depth+1)
			}
		}
	}
	walk(md, "", 0)
	return set, add
}

// pickPatch chooses a patch from sel: each byte names a path, its top bit
// asking for add when the path is a number.
func pickPatch(set, add []string, sel []byte) (fields, adds []string) {
	for _, c := range sel {
		i := int(c & 0x7f)
		if c&0x80 != 0 && len(add) > 0 {
			adds = append(adds, add[i%len(add)])
			continue
		}
		fields = append(fields, set[i%len(set)])
	}
	return fields, adds
}

// randMessage builds a message of md with random fields set, required ones
// always; nesting stops at depth 3.
func randMessage(rng *rand.Rand, md protoreflect.MessageDescriptor, depth int) *dynamicpb.Message {
	m := dynamicpb.NewMessage(md)
	fds := md.Fields()
	for i := 0; i < fds.Len(); i++ {
		fd := fds.Get(i)
		if fd.Cardinality() != protoreflect.Required && rng.IntN(3) != 0 {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for j := rng.IntN(3); j > 0; j-- {
				mp.Set(randValue(rng, fd.MapKey(), depth).MapKey(), randValue(rng, fd.MapValue(), depth))
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := rng.IntN(4); j > 0; j-- {
				l.Append(randValue(rng, fd, depth))
			}
		case fd.Message() != nil && depth >= 3 && fd.Cardinality() != protoreflect.Required:
		default:
			m.Set(fd, randValue(rng, fd, depth))
		}
	}
	if rng.IntN(4) == 0 {
		m.SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), rng.Uint64()))
	}
	return m
}

func randValue(rng *rand.Rand, fd protoreflect.FieldDescriptor, depth int) protoreflect.Value {
	if fd.Message() != nil {
		return protoreflect.ValueOfMessage(randMessage(rng, fd.Message(), depth+1))
	}
	small := []int64{0, 1, -1, 7, -300}
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if rng.IntN(6) == 0 {
			return protoreflect.ValueOfInt32([]int32{math.MaxInt32, math.MinInt32}[rng.IntN(2)])
		}
		return protoreflect.ValueOfInt32(int32(small[rng.IntN(len(small))]))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if rng.IntN(6) == 0 {
			return protoreflect.ValueOfInt64([]int64{math.MaxInt64, math.MinInt64}[rng.IntN(2)])
		}
		return protoreflect.ValueOfInt64(small[rng.IntN(len(small))])
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32([]uint32{0, 1, 9, math.MaxUint32}[rng.IntN(4)])
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64([]uint64{0, 1, 9, math.MaxUint64}[rng.IntN(4)])
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32([]float32{0, 1.5, -2.25, 3e38}[rng.IntN(4)])
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{0, 0.5, -1e300, 1e300}[rng.IntN(4)])
	}
	return sampleValue(fd, rng.IntN(4))
}

// randRecord encodes a random message of typ, sometimes as several
// encodings concatenated (which a decoder merges), sometimes as the fields
// of one shuffled into a non-canonical order.
func randRecord(t testing.TB, rng *rand.Rand, md protoreflect.MessageDescriptor) []byte {
	b := marshal(t, randMessage(rng, md, 0))
	switch rng.IntN(4) {
	case 0:
		return cat(b, marshal(t, randMessage(rng, md, 0)))
	case 1:
		// Three: a member of a oneof, another, the first again leaves
		// the first occurrence dead.
		return cat(b, marshal(t, randMessage(rng, md, 0)), marshal(t, randMessage(rng, md, 0)))
	case 2:
		return shuffleFields(rng, b)
	}
	return b
}

// shuffleFields reorders a record's top-level fields.
func shuffleFields(rng *rand.Rand, b []byte) []byte {
	var parts [][]byte
	for i := 0; i < len(b); {
		_, _, _, end, err := fieldAt(b, i)
		if err != nil {
			return b
		}
		parts = append(parts, b[i:end])
		i = end
	}
	rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return cat(parts...)
}

// TestPatchOracle runs random patches of random records of both test
// schemas against the oracle.
func TestPatchOracle(t *testing.T) {
	s := loadSchema(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []*Type{s.recordT, s.legacyT} {
		set, add := patchPaths(typ.Descriptor())
		// Half the patches name oneof members and the paths into them,
		// where most of the cases are.
		var oneofSet, oneofAdd []string
		for _, p := range set {
			if strings.HasPrefix(p, "choice") {
				oneofSet = append(oneofSet, p)
			}
		}
		for _, p := range add {
			if strings.HasPrefix(p, "choice") {
				oneofAdd = append(oneofAdd, p)
			}
		}
		ran := 0
		for ran < 4000 {
			sel := make([]byte, 1+rng.IntN(4))
			for i := range sel {
				sel[i] = byte(rng.Uint32())
			}
			fields, adds := pickPatch(set, add, sel)
			if len(oneofSet) > 0 && ran%2 == 0 {
				fields, adds = pickPatch(oneofSet, oneofAdd, sel)
			}
			p, err := typ.CompilePatch(fields, adds, nil)
			if err != nil {
				continue // overlapping or repeated paths
			}
			stored := randRecord(t, rng, typ.Descriptor())
			rec := randRecord(t, rng, typ.Descriptor())
			if typ.Validate(rec) != nil {
				continue // the unknown field randMessage adds
			}
			checkPatchOracle(t, typ, p, fields, adds, stored, rec)
			ran++
		}
	}
}

var fuzzPatch struct {
	set, add []string
}

// FuzzPatch checks that Apply never panics on arbitrary bytes, and that on
// a stored record that unmarshals and a record Validate accepts it agrees
// with the oracle.
func FuzzPatch(f *testing.F) {
	s := loadSchema(f)
	full := marshal(f, fullRecord(s))
	f.Add(full, benchRecord(f, s), []byte{0, 5, 0x80})
	f.Add(benchRecord(f, s), full, []byte{59, 60, 0x81})
	f.Add(cat(lenF(66, str(1, "x")), vint(67, 5), lenF(66, str(2, "y"))), cat(str(65, "z"), lenF(66, str(2, "w"))), []byte{64, 65, 66})
	f.Add(cat(full, vint(99, 1)), cat(lenF(60, str(1, "c")), lenF(60, vint(3, 4))), []byte{61, 62, 0x90})
	fuzzPatch.set, fuzzPatch.add = patchPaths(s.record)
	f.Fuzz(func(t *testing.T, stored, rec, sel []byte) {
		if len(sel) > 6 {
			sel = sel[:6]
		}
		fields, adds := pickPatch(fuzzPatch.set, fuzzPatch.add, sel)
		p, err := s.recordT.CompilePatch(fields, adds, nil)
		if err != nil {
			var pe *PatchError
			if !errors.As(err, &pe) || (pe.Field == "" && len(sel) > 0) {
				t.Fatalf("CompilePatch(%q, %q): %v", fields, adds, err)
			}
			return
		}
		out, err := p.Apply([]byte("prefix"), stored, rec)
		if !strings.HasPrefix(string(out), "prefix") {
			t.Fatalf("Apply lost dst's bytes: %q (error %v)", out, err)
		}
		if s.recordT.Validate(rec) != nil {
			return
		}
		if _, err := unmarshal(s.record, stored); err != nil || s.recordT.Validate(stored) != nil {
			return
		}
		checkPatchOracle(t, s.recordT, p, fields, adds, stored, rec)
	})
}

// TestPatchApplyCorrupt runs random patches over random records with a
// byte changed or cut off: Apply returns an error or a result, never
// panics, and on error leaves dst as it was.
func TestPatchApplyCorrupt(t *testing.T) {
	s := loadSchema(t)
	rng := rand.New(rand.NewPCG(3, 4))
	set, add := patchPaths(s.record)
	for ran := 0; ran < 3000; {
		sel := []byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
		fields, adds := pickPatch(set, add, sel)
		p, err := s.recordT.CompilePatch(fields, adds, nil)
		if err != nil {
			continue
		}
		ran++
		stored, rec := randRecord(t, rng, s.record), randRecord(t, rng, s.record)
		for _, b := range [][]byte{stored, rec} {
			if len(b) > 0 && rng.IntN(2) == 0 {
				b[rng.IntN(len(b))] = byte(rng.Uint32())
			}
		}
		stored, rec = stored[:rng.IntN(len(stored)+1)], rec[:rng.IntN(len(rec)+1)]
		out, err := p.Apply([]byte("dst"), stored, rec)
		if err != nil && string(out) != "dst" {
			t.Fatalf("fields %q add %q: error %v, and dst became %q", fields, adds, err, out)
		}
	}
}
