package client

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// applyPatch computes what a Patch of base by patch leaves, as the server
// computes it at commit (WRITE_OP_PATCH): each path of fields takes
// patch's value (cleared when patch lacks it), each path of add has
// patch's value added to base's (an absent value counts as 0; an integer
// overflow is an error), and everything else base holds stays, unknown
// fields included. A transaction uses it to read its own patches; what it
// sends is the patch itself. A nil base (no record) stays nil: the commit
// fails with NOT_FOUND.
func (t *Types) applyPatch(base, patch *anypb.Any, fields, add []string) (*anypb.Any, error) {
	if base == nil {
		return nil, nil
	}
	bm, err := t.Message(base)
	if err != nil {
		return nil, err
	}
	pm, err := t.Message(patch)
	if err != nil {
		return nil, err
	}
	md := bm.Descriptor()
	for _, p := range fields {
		fds, err := fieldPath(md, p)
		if err != nil {
			return nil, fmt.Errorf("patch field %q: %w", p, err)
		}
		setPath(bm, pm, fds)
	}
	for _, p := range add {
		fds, err := fieldPath(md, p)
		if err != nil {
			return nil, fmt.Errorf("patch add %q: %w", p, err)
		}
		if err := addPath(bm, pm, fds); err != nil {
			return nil, fmt.Errorf("patch add %q: %w", p, err)
		}
	}
	b, err := proto.Marshal(bm)
	if err != nil {
		return nil, err
	}
	return &anypb.Any{TypeUrl: base.GetTypeUrl(), Value: b}, nil
}

// patchLevels walks dst and src down to the message holding the last
// field of fds, as the server's patch does: a message the patch's record
// (src) holds is created in dst where missing; one only dst holds is
// patched in place, src reading as empty below it; where neither holds
// it, ok is false and the patch leaves the path as it is.
func patchLevels(dst, src protoreflect.Message, fds []protoreflect.FieldDescriptor) (d, s protoreflect.Message, ok bool) {
	for _, fd := range fds[:len(fds)-1] {
		switch {
		case src != nil && src.Has(fd):
			src = src.Get(fd).Message()
		case dst.Has(fd):
			src = nil
		default:
			return nil, nil, false
		}
		dst = dst.Mutable(fd).Message()
	}
	return dst, src, true
}

// setPath gives dst the value src holds at fds, or clears it there.
func setPath(dst, src protoreflect.Message, fds []protoreflect.FieldDescriptor) {
	leaf := fds[len(fds)-1]
	d, s, ok := patchLevels(dst, src, fds)
	if !ok {
		return
	}
	if s == nil || !s.Has(leaf) {
		d.Clear(leaf)
		return
	}
	// A composite value is copied through the wire form, which dynamic
	// messages of one descriptor share; a scalar is set as it is.
	if leaf.IsList() || leaf.IsMap() || leaf.Message() != nil {
		d.Clear(leaf)
		b, _ := proto.Marshal(onlyField(s, leaf))
		_ = proto.UnmarshalOptions{Merge: true}.Unmarshal(b, d.Interface())
		return
	}
	d.Set(leaf, s.Get(leaf))
}

// onlyField is a message of m's type holding only m's field fd.
func onlyField(m protoreflect.Message, fd protoreflect.FieldDescriptor) proto.Message {
	out := m.New()
	out.Set(fd, m.Get(fd))
	return out.Interface()
}

// addPath adds src's numeric value at fds to dst's; a field neither
// holds stays absent.
func addPath(dst, src protoreflect.Message, fds []protoreflect.FieldDescriptor) error {
	leaf := fds[len(fds)-1]
	if leaf.IsList() || leaf.IsMap() {
		return fmt.Errorf("field %s is not a numeric scalar", leaf.Name())
	}
	d, s, ok := patchLevels(dst, src, fds)
	if !ok {
		return nil
	}
	held, stored := s != nil && s.Has(leaf), d.Has(leaf)
	if !held && !stored {
		return nil
	}
	// An absent value counts as 0, not as a proto2 field's default.
	delta, cur := zeroOf(leaf.Kind()), zeroOf(leaf.Kind())
	if held {
		delta = s.Get(leaf)
	}
	if stored {
		cur = d.Get(leaf)
	}
	sum, err := addValues(leaf.Kind(), cur, delta)
	if err != nil {
		return err
	}
	d.Set(leaf, sum)
	return nil
}

// zeroOf is the zero of a numeric kind.
func zeroOf(k protoreflect.Kind) protoreflect.Value {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(0)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(0)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(0)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(0)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0)
	}
	return protoreflect.ValueOfInt64(0)
}

// addValues adds two values of a numeric kind; an integer sum that leaves
// the kind's range is an error, as the server's OUT_OF_RANGE is.
func addValues(k protoreflect.Kind, a, b protoreflect.Value) (protoreflect.Value, error) {
	overflow := func() error { return fmt.Errorf("%v + %v overflows %v", a.Interface(), b.Interface(), k) }
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		s := a.Int() + b.Int()
		if s < math.MinInt32 || s > math.MaxInt32 {
			return protoreflect.Value{}, overflow()
		}
		return protoreflect.ValueOfInt32(int32(s)), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		x, y := a.Int(), b.Int()
		s := x + y
		if (y > 0 && s < x) || (y < 0 && s > x) {
			return protoreflect.Value{}, overflow()
		}
		return protoreflect.ValueOfInt64(s), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		s := a.Uint() + b.Uint()
		if s > math.MaxUint32 {
			return protoreflect.Value{}, overflow()
		}
		return protoreflect.ValueOfUint32(uint32(s)), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		s := a.Uint() + b.Uint()
		if s < a.Uint() {
			return protoreflect.Value{}, overflow()
		}
		return protoreflect.ValueOfUint64(s), nil
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(a.Float()) + float32(b.Float())), nil
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(a.Float() + b.Float()), nil
	}
	return protoreflect.Value{}, fmt.Errorf("a %v field is not numeric", k)
}
