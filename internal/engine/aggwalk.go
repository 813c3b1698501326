package engine

import (
	"math"
	"math/bits"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// aggWalk reads the top-level scalar fields of an aggregate from a record's
// bytes in one pass, decoding each value straight into its aggVal as it
// meets it: the per-record path of an aggregate without an index, so it
// takes no allocation, no interface call and no intermediate record.Scalar.
// It serves the fields keyExtractor.slot serves, with the same rule (the
// last occurrence wins, an absent field reads as its default); a record it
// cannot walk, or a value it cannot decode, is read field by field with
// aggField.read instead, so that a malformed record gets the error
// record.Path.Get gives.
//
// Rejected: keyExtractor.locate followed by decodeValue per field:
// building each value through record.Scalar and a FieldDescriptor.Kind
// call costs about 35 ns a field, more than reading the record from the
// store. Noting where each field lies and decoding them after the walk
// cost 5 ns a record more than decoding them in it.
type aggWalk struct {
	// slotOf[num] is 1 + the slot of top-level field num, 0 when no walked
	// field has that number; numbers past it are looked up in nums.
	slotOf [walkDirect]uint8
	nums   []protowire.Number
	wts    []protowire.Type // the wire type each slot's field must have
	// field[s] is the position in aggSpec.fields of slot s's field.
	field []int
	all   uint64 // a bit for every slot
}

// walkDirect bounds the field numbers slotOf maps directly: the fields of
// most records lie below it.
const walkDirect = 64

// walkSlots bounds the fields one walk reads: read notes them in a word.
const walkSlots = 64

// newAggWalk prepares the walk of the fields of s that keyExtractor.slot
// serves; nil when there are none, or too many. It sets each field's slot,
// kind and unset value.
func newAggWalk(s *aggSpec) *aggWalk {
	x := &keyExtractor{}
	w := &aggWalk{}
	for _, f := range s.fields {
		f.slot = -1
		if f.cls == vTime {
			continue
		}
		f.slot = x.slot(f.path)
		if f.slot < 0 {
			continue
		}
		f.kind = f.fd.Kind()
		if !f.presence {
			def, _, _ := f.path.Get(nil)
			f.unset = scalarVal(f.cls, def.Int, def.Uint, def.Float, def.Bytes, def.Bool)
		}
	}
	if len(x.nums) == 0 || len(x.nums) > walkSlots {
		for _, f := range s.fields {
			f.slot = -1
		}
		return nil
	}
	w.nums, w.wts = x.nums, x.wts
	w.field = make([]int, len(x.nums))
	for k, f := range s.fields {
		if f.slot >= 0 {
			// Fields are one per name, and so one per number.
			w.field[f.slot] = k
		}
	}
	for s, n := range w.nums {
		if n < walkDirect {
			w.slotOf[n] = uint8(s + 1)
		}
		w.all |= 1 << s
	}
	return w
}

// slot is the slot of field num, or -1.
func (w *aggWalk) slot(num protowire.Number) int {
	if num < walkDirect {
		return int(w.slotOf[num]) - 1
	}
	for s, n := range w.nums {
		if n == num {
			return s
		}
	}
	return -1
}

// read fills vals (parallel to aggSpec.fields) with the walked fields of
// rec. It reports false when rec cannot be walked or a value not decoded:
// the caller then reads those fields with aggField.read.
func (w *aggWalk) read(fields []*aggField, rec []byte, vals []aggVal) bool {
	var seen uint64
	for i := 0; i < len(rec); {
		var num protowire.Number
		var wt protowire.Type
		n := 1
		if c := rec[i]; c < 0x80 && c >= 8 { // a one-byte tag, the usual case
			num, wt = protowire.Number(c>>3), protowire.Type(c&7)
		} else if num, wt, n = protowire.ConsumeTag(rec[i:]); n < 0 {
			return false
		}
		// The shapes of short fields inline: strings, and the integers a
		// walk steps over (ids, counters), mostly of up to three bytes.
		var m int
		switch rest := rec[i+n:]; {
		case wt == protowire.BytesType && len(rest) > 0 && rest[0] < 0x80 && int(rest[0]) < len(rest):
			m = 1 + int(rest[0])
		case wt != protowire.VarintType:
			m = valueLen(num, wt, rest)
		case len(rest) > 0 && rest[0] < 0x80:
			m = 1
		case len(rest) > 1 && rest[1] < 0x80:
			m = 2
		case len(rest) > 2 && rest[2] < 0x80 && rest[1] >= 0x80:
			m = 3
		default:
			m = valueLen(num, wt, rest)
		}
		if m < 0 {
			return false
		}
		if s := w.slot(num); s >= 0 {
			if wt != w.wts[s] {
				return false
			}
			k := w.field[s]
			if !fields[k].decode(rec[i+n:i+n+m], &vals[k]) {
				return false
			}
			seen |= 1 << s
		}
		i += n + m
	}
	if seen != w.all {
		for s, k := range w.field {
			if seen&(1<<s) == 0 {
				vals[k] = fields[k].unset
			}
		}
	}
	return true
}

// decode decodes one value of f, as decodeValue does, into v.
func (f *aggField) decode(b []byte, v *aggVal) bool {
	switch f.kind {
	case protoreflect.StringKind, protoreflect.BytesKind:
		if len(b) > 0 && b[0] < 0x80 && int(b[0]) == len(b)-1 { // a one-byte length
			*v = aggVal{ok: true, b: b[1:len(b):len(b)]}
			return true
		}
		x, n := protowire.ConsumeBytes(b)
		*v = aggVal{ok: true, b: x[:len(x):len(x)]}
		return n >= 0
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		x, n := protowire.ConsumeFixed32(b)
		*v = scalarVal(f.cls, int64(int32(x)), uint64(x), float64(math.Float32frombits(x)), nil, false)
		return n >= 0
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		x, n := protowire.ConsumeFixed64(b)
		*v = scalarVal(f.cls, int64(x), x, math.Float64frombits(x), nil, false)
		return n >= 0
	}
	var x uint64
	if len(b) == 1 {
		x = uint64(b[0])
	} else {
		var n int
		if x, n = protowire.ConsumeVarint(b); n < 0 {
			return false
		}
	}
	*v = aggVal{ok: true}
	switch f.kind {
	case protoreflect.Int32Kind, protoreflect.EnumKind:
		v.i = int64(int32(x))
	case protoreflect.Int64Kind:
		v.i = int64(x)
	case protoreflect.Sint32Kind:
		v.i = int64(int32(protowire.DecodeZigZag(x & math.MaxUint32)))
	case protoreflect.Sint64Kind:
		v.i = protowire.DecodeZigZag(x)
	case protoreflect.Uint32Kind:
		v.u = uint64(uint32(x))
	case protoreflect.Uint64Kind:
		v.u = x
	case protoreflect.BoolKind:
		if x != 0 {
			v.i = 1
		}
	default:
		return false
	}
	return true
}

// scalarVal is the aggVal of a decoded scalar of class cls: the one of
// i, u, f, b that the class reads, a bool as i (0/1).
func scalarVal(cls valClass, i int64, u uint64, f float64, b []byte, t bool) aggVal {
	v := aggVal{ok: true}
	switch cls {
	case vInt:
		v.i = i
	case vUint:
		v.u = u
	case vFloat:
		v.f = f
	case vBool:
		if t {
			v.i = 1
		}
	default:
		v.b = b
	}
	return v
}

// read fills p.vals with rec's values of the spec's fields: the walked ones
// in one pass, the others (and all of a record the walk refuses) each
// through its path.
func (p *aggPart) read(rec []byte) error {
	return p.s.readFields(rec, p.vals, &p.scratch)
}

// readFields fills vals (parallel to s.fields) with rec's values: the
// walked ones in one pass, the others (and all of a record the walk
// refuses) each through its path.
func (s *aggSpec) readFields(rec []byte, vals []aggVal, scratch *[]byte) error {
	walked := s.w != nil && s.w.read(s.fields, rec, vals)
	if walked && len(s.w.field) == len(s.fields) {
		return nil // the walk read them all
	}
	for k, f := range s.fields {
		if walked && f.slot >= 0 {
			continue
		}
		v, err := f.read(rec, scratch)
		if err != nil {
			return err
		}
		vals[k] = v
	}
	return nil
}

// How aggPart.accumulate takes a function's value: the common sums and
// counts inline, the rest through aggAcc.add.
const (
	accOther uint8 = iota
	accCount       // count(): every record
	accInt         // sum or avg of a signed integer
	accUint        // sum or avg of an unsigned integer
	accFloat       // sum or avg of a float
)

// prepare readies s for reading records: the walk of its fields and how
// each function accumulates.
func (s *aggSpec) prepare() {
	s.w = newAggWalk(s)
	for j := range s.funcs {
		fn := &s.funcs[j]
		switch {
		case fn.field == nil:
			fn.how = accCount
		case fn.op != pb.AggregateOp_AGGREGATE_OP_SUM && fn.op != pb.AggregateOp_AGGREGATE_OP_AVG:
			fn.how = accOther
		case fn.field.cls == vInt:
			fn.how = accInt
		case fn.field.cls == vUint:
			fn.how = accUint
		default:
			fn.how = accFloat
		}
	}
}

// accumulate adds the values just read (p.vals) to grp's functions.
func (p *aggPart) accumulate(grp *aggGroup) {
	var carry uint64
	for j := range p.s.funcs {
		fn := &p.s.funcs[j]
		acc := &grp.accs[j]
		if fn.how == accCount {
			acc.n++
			continue
		}
		v := &p.vals[fn.at]
		if !v.ok {
			continue
		}
		switch fn.how {
		case accInt:
			acc.n++
			acc.lo, carry = bits.Add64(acc.lo, uint64(v.i), 0)
			acc.hi += v.i>>63 + int64(carry)
		case accUint:
			acc.n++
			acc.lo, carry = bits.Add64(acc.lo, v.u, 0)
			acc.hi += int64(carry)
		case accFloat:
			acc.n++
			addCompensated(&acc.f, &acc.fc, v.f)
		default:
			acc.add(fn, *v)
		}
	}
}
