package record

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Validate reports whether b is a well-formed encoding of t's message that
// uses only declared fields. It returns nil or an *Error.
//
// Validate is deliberately stricter than proto.Unmarshal, because a record
// that passes is stored verbatim and later read field by field: unknown field
// numbers and extensions are rejected rather than preserved, string fields
// must be valid UTF-8 whatever the syntax, a field must use the wire type of
// its kind (repeated scalars may be packed or not), nesting is limited to
// MaxDepth, and proto2 required fields must be present in every occurrence of
// their message (the runtime checks only the merged result). Anything Validate
// accepts, proto.Unmarshal accepts too.
//
// It does not allocate unless it fails (or a message declares more than 64
// required fields).
func (t *Type) Validate(b []byte) error {
	if _, err := t.root.validate(b, 0, 0, 0); err != nil {
		return err
	}
	return nil
}

// validate checks the fields in b, which starts at offset base of the record.
// For a group (group != 0) b runs to the end of the enclosing buffer and the
// message ends at the matching end-group tag; the returned length includes
// that tag.
//
// The loop handles the common cases (one-byte tags and lengths, scalars,
// strings) inline and leaves everything rare, including building errors, to
// helpers, because this is the per-write cost of the database: moving the
// string case into a helper alone cost about 12% on BenchmarkValidate.
func (m *msgInfo) validate(b []byte, base, depth int, group protowire.Number) (int, *Error) {
	var seen requiredSeen
	if len(m.required) > 64 {
		seen.big = make([]uint64, (len(m.required)+63)/64)
	}
	i := 0
	for i < len(b) {
		start := i
		tag := uint64(b[i])
		if tag < 0x80 {
			i++
		} else if v, n := consumeVarint(b[i:]); n > 0 {
			tag, i = v, i+n
		} else {
			return 0, &Error{Offset: base + start, Reason: tagReason(n)}
		}
		sl := m.slotOf(tag)
		if sl.idx == 0 || protowire.Type(tag&7) != sl.wt {
			k, end, err := m.validateIrregular(b[i:], sl, tag, group, base+start, base+i)
			if err != nil {
				return 0, err
			}
			if end {
				// The group's end: what is left to check is that its
				// required fields occurred.
				return i, m.validateEnd(seen, 0, base+start)
			}
			i += k
			continue
		}
		switch sl.class {
		case classVarint:
			if i < len(b) && b[i] < 0x80 {
				i++
			} else if k := skipVarint(b[i:]); k >= 0 {
				i += k
			} else {
				return 0, m.fields[sl.idx-1].err(base+i, varintReason(k))
			}
		case classFixed32, classFixed64:
			w := fixedWidth(sl.class)
			if len(b)-i < w {
				return 0, m.fields[sl.idx-1].err(base+i, "truncated fixed"+strconv.Itoa(8*w)+" value")
			}
			i += w
		case classString, classBytes:
			var l uint64
			var n int
			if i < len(b) && b[i] < 0x80 {
				l, n = uint64(b[i]), 1
			} else if l, n = consumeVarint(b[i:]); n < 0 {
				return 0, m.fields[sl.idx-1].err(base+i, bytesReason(n))
			}
			if l > uint64(len(b)-i-n) {
				return 0, m.fields[sl.idx-1].err(base+i, bytesReason(errTruncated))
			}
			if sl.class == classString && !validUTF8(b[i+n:i+n+int(l)]) {
				return 0, m.fields[sl.idx-1].err(base+i, "invalid UTF-8")
			}
			i += n + int(l)
		default:
			k, err := m.fields[sl.idx-1].validateMessage(b[i:], base+start, base+i, depth)
			if err != nil {
				return 0, err
			}
			i += k
		}
		if sl.req {
			seen.set(m.fields[sl.idx-1].reqBit)
		}
	}
	return i, m.validateEnd(seen, group, base+len(b))
}

// slotOf returns the slot of a tag's field number: zero when undeclared.
func (m *msgInfo) slotOf(tag uint64) slot {
	if num := tag >> 3; num < uint64(len(m.dense)) {
		return m.dense[num]
	}
	return m.sparseSlot(tag)
}

// sparseSlot looks up the field number of a tag too large for the dense
// table; the map is only consulted for numbers a tag can legally carry. It is
// kept out of line so that slotOf, on every field's path, inlines.
//
//go:noinline
func (m *msgInfo) sparseSlot(tag uint64) slot {
	num := tag >> 3
	if m.sparse == nil || num > uint64(protowire.MaxValidNumber) {
		return slot{}
	}
	return m.sparse[protowire.Number(num)]
}

// validateIrregular handles a tag that is not a declared field with its
// kind's own wire type: the packed form of a repeated scalar (b is its
// value, at record offset off; the tag is at tagOff), the end-group tag that
// closes the group being validated (end is true), or an error. They share a
// path because none of them is the plain case the validate loop is tuned
// for.
func (m *msgInfo) validateIrregular(b []byte, sl slot, tag uint64, group protowire.Number, tagOff, off int) (n int, end bool, err *Error) {
	wt := protowire.Type(tag & 7)
	switch {
	case sl.packed && wt == protowire.BytesType:
		n, err := m.fields[sl.idx-1].validatePacked(b, off)
		return n, false, err
	case wt == protowire.EndGroupType && group != 0 && tag>>3 == uint64(group):
		return 0, true, nil
	}
	return 0, false, m.tagError(sl, tag, group, tagOff)
}

// validateEnd checks what can only be checked at the end of a message's
// bytes, at record offset off: a group must have been closed by its
// end-group tag, and every required field must have occurred. Most messages
// have neither, and for them the check stays inline in the loop.
func (m *msgInfo) validateEnd(seen requiredSeen, group protowire.Number, off int) *Error {
	if group == 0 && len(m.required) == 0 {
		return nil
	}
	return m.endError(seen, group, off)
}

// endError is validateEnd's out-of-line part, kept out of line so that
// validateEnd inlines.
//
//go:noinline
func (m *msgInfo) endError(seen requiredSeen, group protowire.Number, off int) *Error {
	if group != 0 {
		return &Error{Number: group, Offset: off, Reason: "truncated group: missing end-group tag"}
	}
	return m.checkRequired(seen, off)
}

// fixedWidth is the size in bytes of a value of class classFixed32 or
// classFixed64.
func fixedWidth(c wireClass) int {
	if c == classFixed32 {
		return 4
	}
	return 8
}

// requiredSeen records which required fields of one occurrence of a message
// have been seen, one bit per entry of msgInfo.required: in small when there
// are at most 64, else in big, which then has a word per 64 fields.
type requiredSeen struct {
	small uint64
	big   []uint64
}

func (r *requiredSeen) set(bit int) {
	if r.big == nil {
		r.small |= 1 << uint(bit)
	} else {
		r.big[bit>>6] |= 1 << uint(bit&63)
	}
}

func (r *requiredSeen) has(bit int) bool {
	if r.big == nil {
		return r.small&(1<<uint(bit)) != 0
	}
	return r.big[bit>>6]&(1<<uint(bit&63)) != 0
}

// tagError explains why a tag was not acceptable: sl is its field's slot
// (zero if undeclared) and group the number of the enclosing group, if any.
func (m *msgInfo) tagError(sl slot, tag uint64, group protowire.Number, off int) *Error {
	wt := protowire.Type(tag & 7)
	if n := tag >> 3; n == 0 || n > uint64(protowire.MaxValidNumber) {
		return &Error{Offset: off, Reason: "invalid field number " + strconv.FormatUint(n, 10)}
	}
	num := protowire.Number(tag >> 3)
	switch {
	case wt == protowire.EndGroupType && group == 0:
		return &Error{Number: num, Offset: off, Reason: "unexpected end-group tag"}
	case wt == protowire.EndGroupType:
		return &Error{Number: num, Offset: off,
			Reason: fmt.Sprintf("end-group tag for field %d does not match start-group for field %d", num, group)}
	case sl.idx == 0:
		return &Error{Number: num, Offset: off, Reason: "unknown field number " + strconv.Itoa(int(num))}
	}
	return m.fields[sl.idx-1].err(off, wireTypeMismatch(wt, sl.wt))
}

// validUTF8 is utf8.Valid with a byte loop in front: record strings are
// mostly short and ASCII, where the loop beats the general routine's setup.
func validUTF8(b []byte) bool {
	for i, c := range b {
		if c >= 0x80 {
			return utf8.Valid(b[i:])
		}
	}
	return true
}

func (m *msgInfo) checkRequired(seen requiredSeen, off int) *Error {
	for bit, f := range m.required {
		if !seen.has(bit) {
			reason := "missing required field"
			if m.md.IsMapEntry() {
				reason = "missing map value (its type has required fields)"
			}
			return &Error{Field: f.name, Number: f.num, Offset: off, Reason: reason}
		}
	}
	return nil
}

// validateMessage checks one occurrence of a message or group field f whose
// tag is at tagOff; b starts right after the tag, at record offset off.
func (f *fieldInfo) validateMessage(b []byte, tagOff, off, depth int) (int, *Error) {
	if depth >= MaxDepth {
		return 0, f.err(tagOff, "nesting deeper than "+strconv.Itoa(MaxDepth))
	}
	if f.class == classGroup {
		n, err := f.msg.validate(b, off, depth+1, f.num)
		if err != nil {
			return 0, err.within(f.name)
		}
		return n, nil
	}
	v, n := consumeBytes(b)
	if n < 0 {
		return 0, f.err(off, bytesReason(n))
	}
	if _, err := f.msg.validate(v, off+n-len(v), depth+1, 0); err != nil {
		return 0, err.within(f.name)
	}
	return n, nil
}

// validatePacked checks a packed run of f's scalars without decoding them.
func (f *fieldInfo) validatePacked(b []byte, off int) (int, *Error) {
	v, n := consumeBytes(b)
	if n < 0 {
		return 0, f.err(off, bytesReason(n))
	}
	switch f.class {
	case classVarint:
		// A run of continuation bytes must end in a terminator, and a varint may
		// span at most 10 bytes with only the low bit set in the 10th.
		run := 0
		for j, c := range v {
			if c >= 0x80 {
				if run++; run == 10 {
					return 0, f.err(off+n-len(v)+j, "packed varint overflows 64 bits")
				}
				continue
			}
			if run == 9 && c > 1 {
				return 0, f.err(off+n-len(v)+j, "packed varint overflows 64 bits")
			}
			run = 0
		}
		if run != 0 {
			return 0, f.err(off+n, "truncated packed varint")
		}
	case classFixed32:
		if len(v)%4 != 0 {
			return 0, f.err(off, fmt.Sprintf("packed fixed32 length %d is not a multiple of 4", len(v)))
		}
	case classFixed64:
		if len(v)%8 != 0 {
			return 0, f.err(off, fmt.Sprintf("packed fixed64 length %d is not a multiple of 8", len(v)))
		}
	}
	return n, nil
}

func (f *fieldInfo) err(off int, reason string) *Error {
	return &Error{Field: f.name, Number: f.num, Offset: off, Reason: reason}
}
