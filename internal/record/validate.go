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
// helpers, because this is the per-write cost of the database.
func (m *msgInfo) validate(b []byte, base, depth int, group protowire.Number) (int, *Error) {
	var seen uint64 // required fields present, when there are at most 64
	var seenBig []uint64
	if len(m.required) > 64 {
		seenBig = make([]uint64, (len(m.required)+63)/64)
	}
	i := 0
	for i < len(b) {
		start := i
		tag := uint64(b[i])
		if tag < 0x80 {
			i++
		} else {
			v, n := consumeVarint(b[i:])
			if n < 0 {
				return 0, &Error{Offset: base + start, Reason: tagReason(n)}
			}
			tag = v
			i += n
		}
		wt := protowire.Type(tag & 7)
		var sl slot
		if num := tag >> 3; num < uint64(len(m.dense)) {
			sl = m.dense[num]
		} else if m.sparse != nil && num <= uint64(protowire.MaxValidNumber) {
			sl = m.sparse[protowire.Number(num)]
		}
		if sl.idx == 0 || wt != sl.wt {
			switch {
			case sl.packed && wt == protowire.BytesType:
				n, err := m.fields[sl.idx-1].validatePacked(b[i:], base+i)
				if err != nil {
					return 0, err
				}
				i += n
				continue
			case wt == protowire.EndGroupType && group != 0 && tag>>3 == uint64(group):
				if len(m.required) != 0 {
					if err := m.checkRequired(seen, seenBig, base+start); err != nil {
						return 0, err
					}
				}
				return i, nil
			}
			return 0, m.tagError(sl, tag, group, base+start)
		}
		switch sl.class {
		case classVarint:
			if i < len(b) && b[i] < 0x80 {
				i++
			} else {
				n := skipVarint(b[i:])
				if n < 0 {
					return 0, m.fields[sl.idx-1].err(base+i, varintReason(n))
				}
				i += n
			}
		case classFixed32:
			if len(b)-i < 4 {
				return 0, m.fields[sl.idx-1].err(base+i, "truncated fixed32 value")
			}
			i += 4
		case classFixed64:
			if len(b)-i < 8 {
				return 0, m.fields[sl.idx-1].err(base+i, "truncated fixed64 value")
			}
			i += 8
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
			n, err := m.fields[sl.idx-1].validateMessage(b[i:], base+start, base+i, depth)
			if err != nil {
				return 0, err
			}
			i += n
		}
		if sl.req {
			bit := m.fields[sl.idx-1].reqBit
			if seenBig == nil {
				seen |= 1 << uint(bit)
			} else {
				seenBig[bit>>6] |= 1 << uint(bit&63)
			}
		}
	}
	if group != 0 {
		return 0, &Error{Number: group, Offset: base + len(b), Reason: "truncated group: missing end-group tag"}
	}
	if len(m.required) != 0 {
		if err := m.checkRequired(seen, seenBig, base+len(b)); err != nil {
			return 0, err
		}
	}
	return i, nil
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

func (m *msgInfo) checkRequired(seen uint64, seenBig []uint64, off int) *Error {
	if len(m.required) == 0 {
		return nil
	}
	for bit, f := range m.required {
		var ok bool
		if seenBig == nil {
			ok = seen&(1<<uint(bit)) != 0
		} else {
			ok = seenBig[bit>>6]&(1<<uint(bit&63)) != 0
		}
		if !ok {
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
