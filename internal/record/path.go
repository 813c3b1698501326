package record

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Scalar is one decoded scalar value. Which member is meaningful depends on
// Kind: Int for signed integer kinds and enums, Uint for unsigned ones, Float
// for float and double, Bool for bool, Bytes for string and bytes.
//
// Bytes aliases the record buffer (or, for a default value, memory shared by
// all readers of the Path): it must not be modified, and it is only valid as
// long as the record buffer is. Its capacity is clipped to its length, so
// appending to it copies instead of overwriting the record.
type Scalar struct {
	Kind  protoreflect.Kind
	Int   int64
	Uint  uint64
	Float float64
	Bool  bool
	Bytes []byte
}

// Path is a compiled dotted field path such as "address.city". Every segment
// but the last names a message field (singular, repeated or map; a map field
// is a repeated message with fields "key" and "value"). A Path is immutable and
// safe for concurrent use.
type Path struct {
	str   string
	steps []step
	def   Scalar // value Get reports when the last field is absent
	// getErr and eachErr are fixed at compile time for paths the method cannot
	// serve, so the call itself never allocates to say so.
	getErr  error
	eachErr error
}

type step struct {
	num      protowire.Number
	name     string
	fd       protoreflect.FieldDescriptor
	kind     protoreflect.Kind
	class    wireClass
	wt       protowire.Type
	repeated bool
	packable bool
	// oneof lists the other members of the field's (non-synthetic) oneof:
	// seeing one of them after the field clears it, as a merge would.
	oneof []protowire.Number
}

// Path compiles a dotted path of field names relative to t's message.
func (t *Type) Path(path string) (*Path, error) {
	if path == "" {
		return nil, errors.New("record: empty path")
	}
	p := &Path{str: path}
	md := t.md
	var prev protoreflect.FieldDescriptor
	for _, name := range strings.Split(path, ".") {
		if md == nil {
			return nil, fmt.Errorf("record: path %q: field %q is a %v, not a message, so it has no field %q", path, prev.Name(), prev.Kind(), name)
		}
		if name == "" {
			return nil, fmt.Errorf("record: path %q: empty segment", path)
		}
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return nil, fmt.Errorf("record: path %q: message %s has no field %q", path, md.FullName(), name)
		}
		s := step{
			num:      fd.Number(),
			name:     name,
			fd:       fd,
			kind:     fd.Kind(),
			repeated: fd.Cardinality() == protoreflect.Repeated,
		}
		s.class, s.wt = classOf(s.kind)
		s.packable = fd.IsList() && s.class <= classFixed64
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			for i := 0; i < od.Fields().Len(); i++ {
				if n := od.Fields().Get(i).Number(); n != s.num {
					s.oneof = append(s.oneof, n)
				}
			}
		}
		p.steps = append(p.steps, s)
		md = fd.Message() // nil for scalars; the map entry for maps
		prev = fd
	}
	last := p.Field()
	switch {
	case last.Message() != nil:
		p.getErr = fmt.Errorf("record: path %q ends at message field %q, not a scalar", path, last.Name())
		p.eachErr = p.getErr
	default:
		p.def = defaultScalar(last)
		for _, s := range p.steps {
			if s.repeated {
				p.getErr = fmt.Errorf("record: path %q: field %q is repeated; use Each", path, s.name)
				break
			}
		}
	}
	return p, nil
}

func defaultScalar(fd protoreflect.FieldDescriptor) Scalar {
	s := Scalar{Kind: fd.Kind()}
	if fd.IsList() {
		return s
	}
	d := fd.Default()
	switch fd.Kind() {
	case protoreflect.BoolKind:
		s.Bool = d.Bool()
	case protoreflect.EnumKind:
		s.Int = int64(d.Enum())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		s.Int = d.Int()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		s.Uint = d.Uint()
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		s.Float = d.Float()
	case protoreflect.StringKind:
		if v := d.String(); v != "" {
			s.Bytes = []byte(v)
		}
	case protoreflect.BytesKind:
		if v := d.Bytes(); len(v) > 0 {
			s.Bytes = append([]byte(nil), v...)
		}
	}
	s.Bytes = s.Bytes[:len(s.Bytes):len(s.Bytes)]
	return s
}

// String returns the path as it was written.
func (p *Path) String() string { return p.str }

// Field returns the descriptor of the path's last field.
func (p *Path) Field() protoreflect.FieldDescriptor { return p.steps[len(p.steps)-1].fd }

// Numbers returns the field numbers along the path.
func (p *Path) Numbers() []protowire.Number {
	nums := make([]protowire.Number, len(p.steps))
	for i, s := range p.steps {
		nums[i] = s.num
	}
	return nums
}

// presence tracks what a scan has seen of the path's value so far. cleared
// differs from absent: it means a later oneof sibling wiped a value that an
// earlier occurrence set, which must override that earlier occurrence when
// results from several occurrences of an enclosing message are combined.
type presence uint8

const (
	absent presence = iota
	present
	cleared
)

// Get returns the value at a path of singular fields ending at a scalar, with
// the result a full decode and merge would give: the last occurrence wins,
// occurrences of enclosing messages merge, and a later member of the same
// oneof clears the field. When the field is absent it returns the field's
// default (zero, or the proto2 explicit default) and found=false.
//
// Get does not validate b beyond what it must parse; fields other than those
// on the path are skipped, not checked. It does not allocate unless it fails.
func (p *Path) Get(b []byte) (v Scalar, found bool, err error) {
	if p.getErr != nil {
		return p.def, false, p.getErr
	}
	v, st, e := p.get(b, 0, 0)
	if e != nil {
		return p.def, false, e
	}
	if st != present {
		return p.def, false, nil
	}
	return v, true, nil
}

func (p *Path) get(b []byte, base, level int) (v Scalar, st presence, err *Error) {
	s := &p.steps[level]
	last := level == len(p.steps)-1
	at, atWt := 0, protowire.Type(0) // where the last occurrence's value starts
	for i := 0; ; {
		start, j, wt, clr, e := s.seek(b, i, base)
		if clr {
			st = cleared
		}
		if e != nil {
			return v, st, e
		}
		if start < 0 {
			break
		}
		if last {
			// Decoding waits for the end: only the last occurrence matters,
			// but each must still be well-formed enough to skip.
			k, reason := s.skipScalar(wt, b[j:])
			if reason != "" {
				return v, st, &Error{Field: s.name, Number: s.num, Offset: base + start, Reason: reason}
			}
			at, atWt, st = j, wt, present
			i = j + k
			continue
		}
		payload, pre, k, reason := s.messagePayload(wt, b[j:])
		if reason != "" {
			return v, st, &Error{Field: s.name, Number: s.num, Offset: base + start, Reason: reason}
		}
		sv, sst, e := p.get(payload, base+j+pre, level+1)
		if e != nil {
			return v, st, e.within(s.name)
		}
		if sst != absent {
			v, st = sv, sst
		}
		i = j + k
	}
	if last && st == present {
		v, _, _ = decodeScalar(s, atWt, b[at:])
	}
	return v, st, nil
}

// seek finds the next occurrence of s's field in b at or after i (b starts
// at record offset base) and returns where its tag starts, where its value
// starts and its wire type; start is -1 when there is none. clr reports that
// a member of the same oneof was passed on the way, which clears whatever
// earlier occurrences set, so callers apply it before the occurrence.
//
// Skipping other fields is most of the work of a read, so the loop stays in
// one function and takes the common one-byte shapes inline.
func (s *step) seek(b []byte, i, base int) (start, next int, wt protowire.Type, clr bool, err *Error) {
	for i < len(b) {
		start = i
		tag := uint64(b[i])
		if tag < 0x80 {
			i++
		} else if v, n := consumeVarint(b[i:]); n > 0 {
			tag, i = v, i+n
		} else {
			return start, i, 0, clr, &Error{Offset: base + start, Reason: tagReason(n)}
		}
		wt = protowire.Type(tag & 7)
		if tag>>3 == uint64(s.num) {
			return start, i, wt, clr, nil
		}
		if tag>>3-1 >= uint64(protowire.MaxValidNumber) {
			return start, i, wt, clr, &Error{Offset: base + start, Reason: "invalid field number " + strconv.FormatUint(tag>>3, 10)}
		}
		num := protowire.Number(tag >> 3)
		clr = clr || s.clearedBy(num)
		switch {
		case wt == protowire.VarintType && i < len(b) && b[i] < 0x80:
			i++
		case wt == protowire.BytesType && i < len(b) && b[i] < 0x80 && int(b[i]) < len(b)-i:
			i += 1 + int(b[i])
		case wt == protowire.Fixed64Type && len(b)-i >= 8:
			i += 8
		case wt == protowire.Fixed32Type && len(b)-i >= 4:
			i += 4
		default:
			k, reason := skipField(num, wt, b[i:])
			if reason != "" {
				return start, i, wt, clr, &Error{Number: num, Offset: base + start, Reason: reason}
			}
			i += k
		}
	}
	return -1, i, 0, clr, nil
}

// clearedBy reports whether a field numbered num, other than s's own, is in
// s's oneof, so that its occurrence clears s.
func (s *step) clearedBy(num protowire.Number) bool {
	return s.oneof != nil && s.isSibling(num)
}

// skipScalar returns the length of one value of s's scalar kind with wire
// type wt, or why it is not one.
func (s *step) skipScalar(wt protowire.Type, b []byte) (int, string) {
	if wt != s.wt {
		return 0, wireTypeMismatch(wt, s.wt)
	}
	switch s.class {
	case classVarint:
		if len(b) > 0 && b[0] < 0x80 {
			return 1, ""
		}
		n := skipVarint(b)
		if n < 0 {
			return 0, varintReason(n)
		}
		return n, ""
	case classFixed32:
		if len(b) < 4 {
			return 0, "truncated fixed32 value"
		}
		return 4, ""
	case classFixed64:
		if len(b) < 8 {
			return 0, "truncated fixed64 value"
		}
		return 8, ""
	}
	_, n := consumeBytes(b)
	if n < 0 {
		return 0, bytesReason(n)
	}
	return n, ""
}

// Each calls fn for every scalar value the path denotes in the merged
// message, stopping early if fn returns false: each element of a repeated
// last field (packed or not), once per repeated message element along the
// path, and once per reached message for a singular last field (its final
// value, or its default when absent, as Get reports it). An absent singular
// message along the path counts as empty, so a path of only singular fields
// yields exactly Get's value. Map fields along the path are walked entry by
// entry as encoded: a key that occurs twice (which only concatenated
// encodings produce) is visited twice, though a decoder keeps the last.
//
// On malformed input Each returns an *Error, possibly after calling fn for
// values that precede the malformed part.
func (p *Path) Each(b []byte, fn func(Scalar) bool) error {
	if p.eachErr != nil {
		return p.eachErr
	}
	if _, err := p.each([]segment{{b: b}}, 0, fn); err != nil {
		return err
	}
	return nil
}

// segment is one occurrence of a singular message; a singular message that
// occurs several times is the concatenation of its segments.
type segment struct {
	b   []byte
	off int
}

func (p *Path) each(segs []segment, level int, fn func(Scalar) bool) (stop bool, err *Error) {
	s := &p.steps[level]
	var acc eachLevel
	for _, sg := range segs {
		if stop, err := p.eachSegment(&acc, sg, level, fn); stop || err != nil {
			return true, err
		}
	}
	switch {
	case s.repeated:
		return false, nil
	case level == len(p.steps)-1:
		if !acc.found {
			acc.val = p.def
		}
		return !fn(acc.val), nil
	}
	stop, err = p.each(acc.child, level+1, fn)
	if err != nil {
		err = err.within(s.name)
	}
	return stop, err
}

// eachLevel is what Each gathers at one level of the path across the
// occurrences of its enclosing message, for the singular field there: its
// last value (a last step) or its occurrences (a message step), both of
// which a later member of the same oneof clears.
type eachLevel struct {
	val   Scalar
	found bool
	child []segment
}

// eachSegment walks one occurrence of the message at this level: it calls
// fn at once for the elements of a repeated field and descends into each
// element of a repeated message, and records a singular field in acc to be
// reported once all occurrences are merged.
func (p *Path) eachSegment(acc *eachLevel, sg segment, level int, fn func(Scalar) bool) (stop bool, err *Error) {
	s := &p.steps[level]
	last := level == len(p.steps)-1
	b, base := sg.b, sg.off
	for i := 0; ; {
		start, j, wt, clr, e := s.seek(b, i, base)
		if clr {
			acc.found, acc.child = false, acc.child[:0]
		}
		if e != nil {
			return true, e
		}
		if start < 0 {
			return false, nil
		}
		switch {
		case last && s.repeated && wt == protowire.BytesType && s.packable:
			k, stop, reason := eachPacked(s, b[j:], fn)
			if reason != "" {
				return true, &Error{Field: s.name, Number: s.num, Offset: base + start, Reason: reason}
			}
			if stop {
				return true, nil
			}
			i = j + k
		case last:
			sv, k, reason := decodeScalar(s, wt, b[j:])
			if reason != "" {
				return true, &Error{Field: s.name, Number: s.num, Offset: base + start, Reason: reason}
			}
			i = j + k
			if !s.repeated {
				acc.val, acc.found = sv, true
			} else if !fn(sv) {
				return true, nil
			}
		default:
			payload, pre, k, reason := s.messagePayload(wt, b[j:])
			if reason != "" {
				return true, &Error{Field: s.name, Number: s.num, Offset: base + start, Reason: reason}
			}
			sub := segment{b: payload, off: base + j + pre}
			i = j + k
			if !s.repeated {
				acc.child = append(acc.child, sub)
				continue
			}
			stop, e := p.each([]segment{sub}, level+1, fn)
			if e != nil {
				return true, e.within(s.name)
			}
			if stop {
				return true, nil
			}
		}
	}
}

func (s *step) isSibling(num protowire.Number) bool {
	for _, n := range s.oneof {
		if n == num {
			return true
		}
	}
	return false
}

// messagePayload returns the encoded fields of one occurrence of a message
// (or group) field, how many bytes precede them (the length prefix; none for a
// group), and the number of bytes the occurrence consumed.
func (s *step) messagePayload(wt protowire.Type, b []byte) (payload []byte, pre, n int, reason string) {
	if wt != s.wt {
		return nil, 0, 0, wireTypeMismatch(wt, s.wt)
	}
	if s.class == classGroup {
		v, n := protowire.ConsumeGroup(s.num, b)
		if n < 0 {
			return nil, 0, 0, "malformed group: " + protowire.ParseError(n).Error()
		}
		return v, 0, n, ""
	}
	v, n := consumeBytes(b)
	if n < 0 {
		return nil, 0, 0, bytesReason(n)
	}
	return v, n - len(v), n, ""
}

func readTag(b []byte, off int) (protowire.Number, protowire.Type, int, *Error) {
	tag, n := consumeVarint(b)
	if n < 0 {
		return 0, 0, 0, &Error{Offset: off, Reason: tagReason(n)}
	}
	if num := tag >> 3; num == 0 || num > uint64(protowire.MaxValidNumber) {
		return 0, 0, 0, &Error{Offset: off, Reason: "invalid field number " + strconv.FormatUint(num, 10)}
	}
	return protowire.Number(tag >> 3), protowire.Type(tag & 7), n, nil
}

// decodeScalar decodes one unpacked value of s's kind, converting exactly as
// the Go runtime does (32-bit kinds are truncated, int32 and enums
// sign-extended).
func decodeScalar(s *step, wt protowire.Type, b []byte) (Scalar, int, string) {
	if wt != s.wt {
		return Scalar{}, 0, wireTypeMismatch(wt, s.wt)
	}
	switch s.class {
	case classVarint:
		v, n := consumeVarint(b)
		if n < 0 {
			return Scalar{}, 0, varintReason(n)
		}
		return varintScalar(s.kind, v), n, ""
	case classFixed32:
		if len(b) < 4 {
			return Scalar{}, 0, "truncated fixed32 value"
		}
		return fixed32Scalar(s.kind, uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24), 4, ""
	case classFixed64:
		v, n := protowire.ConsumeFixed64(b)
		if n < 0 {
			return Scalar{}, 0, "truncated fixed64 value"
		}
		return fixed64Scalar(s.kind, v), n, ""
	}
	v, n := consumeBytes(b)
	if n < 0 {
		return Scalar{}, 0, bytesReason(n)
	}
	return Scalar{Kind: s.kind, Bytes: v[:len(v):len(v)]}, n, ""
}

// eachPacked calls fn for every element of a packed run.
func eachPacked(s *step, b []byte, fn func(Scalar) bool) (n int, stop bool, reason string) {
	v, n := consumeBytes(b)
	if n < 0 {
		return 0, false, bytesReason(n)
	}
	switch s.class {
	case classFixed32:
		if len(v)%4 != 0 {
			return 0, false, fmt.Sprintf("packed fixed32 length %d is not a multiple of 4", len(v))
		}
		for ; len(v) > 0; v = v[4:] {
			x := uint32(v[0]) | uint32(v[1])<<8 | uint32(v[2])<<16 | uint32(v[3])<<24
			if !fn(fixed32Scalar(s.kind, x)) {
				return n, true, ""
			}
		}
	case classFixed64:
		if len(v)%8 != 0 {
			return 0, false, fmt.Sprintf("packed fixed64 length %d is not a multiple of 8", len(v))
		}
		for ; len(v) > 0; v = v[8:] {
			x, _ := protowire.ConsumeFixed64(v)
			if !fn(fixed64Scalar(s.kind, x)) {
				return n, true, ""
			}
		}
	default:
		for len(v) > 0 {
			x, k := consumeVarint(v)
			if k < 0 {
				return 0, false, "packed: " + varintReason(k)
			}
			v = v[k:]
			if !fn(varintScalar(s.kind, x)) {
				return n, true, ""
			}
		}
	}
	return n, false, ""
}

func varintScalar(k protoreflect.Kind, v uint64) Scalar {
	s := Scalar{Kind: k}
	switch k {
	case protoreflect.Int32Kind, protoreflect.EnumKind:
		s.Int = int64(int32(v))
	case protoreflect.Int64Kind:
		s.Int = int64(v)
	case protoreflect.Sint32Kind:
		s.Int = int64(int32(protowire.DecodeZigZag(v & math.MaxUint32)))
	case protoreflect.Sint64Kind:
		s.Int = protowire.DecodeZigZag(v)
	case protoreflect.Uint32Kind:
		s.Uint = uint64(uint32(v))
	case protoreflect.Uint64Kind:
		s.Uint = v
	case protoreflect.BoolKind:
		s.Bool = v != 0
	}
	return s
}

func fixed32Scalar(k protoreflect.Kind, v uint32) Scalar {
	s := Scalar{Kind: k}
	switch k {
	case protoreflect.Fixed32Kind:
		s.Uint = uint64(v)
	case protoreflect.Sfixed32Kind:
		s.Int = int64(int32(v))
	case protoreflect.FloatKind:
		s.Float = float64(math.Float32frombits(v))
	}
	return s
}

func fixed64Scalar(k protoreflect.Kind, v uint64) Scalar {
	s := Scalar{Kind: k}
	switch k {
	case protoreflect.Fixed64Kind:
		s.Uint = v
	case protoreflect.Sfixed64Kind:
		s.Int = int64(v)
	case protoreflect.DoubleKind:
		s.Float = math.Float64frombits(v)
	}
	return s
}

// AppendFields appends to dst the tag and value bytes of every top-level
// occurrence of the given field numbers in b, verbatim and in record order,
// so that a projection of a record is itself a valid record of the same type.
// b is expected to have passed Validate; on malformed input AppendFields stops
// at the first field it cannot parse and returns what it has appended so far.
func AppendFields(dst, b []byte, nums []protowire.Number) []byte {
	for i := 0; i < len(b); {
		start := i
		num, wt, n, err := readTag(b[i:], 0)
		if err != nil {
			return dst
		}
		i += n
		k, reason := skipField(num, wt, b[i:])
		if reason != "" {
			return dst
		}
		i += k
		for _, want := range nums {
			if num == want {
				dst = append(dst, b[start:i]...)
				break
			}
		}
	}
	return dst
}
