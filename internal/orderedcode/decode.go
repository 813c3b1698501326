package orderedcode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// ErrMalformed is matched, via errors.Is, by every decoding error. Such an
// error means the bytes are not a key produced by this package for the given
// kinds: corruption, or a schema mismatch.
const ErrMalformed = constError("keys: malformed key")

// constError lets ErrMalformed be a constant, so no package state can be
// reassigned by callers.
type constError string

func (e constError) Error() string { return string(e) }

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

func short(k Kind, need, have int) error {
	return malformed("%v needs %d bytes, have %d", k, need, have)
}

// DecodeInt decodes a KindInt component from the front of b and returns the
// rest of b.
func DecodeInt(b []byte) (int64, []byte, error) {
	if len(b) < 8 {
		return 0, b, short(KindInt, 8, len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ signBit64), b[8:], nil
}

// DecodeUint decodes a KindUint component from the front of b and returns the
// rest of b.
func DecodeUint(b []byte) (uint64, []byte, error) {
	if len(b) < 8 {
		return 0, b, short(KindUint, 8, len(b))
	}
	return binary.BigEndian.Uint64(b), b[8:], nil
}

// DecodeBool decodes a KindBool component from the front of b and returns the
// rest of b. Bytes other than 0x00 and 0x01 are rejected so that each value
// has exactly one encoding.
func DecodeBool(b []byte) (bool, []byte, error) {
	if len(b) < 1 {
		return false, b, short(KindBool, 1, len(b))
	}
	switch b[0] {
	case 0:
		return false, b[1:], nil
	case 1:
		return true, b[1:], nil
	}
	return false, b, malformed("bool byte %#02x is neither 0x00 nor 0x01", b[0])
}

// DecodeFloat32 decodes a KindFloat32 component from the front of b and
// returns the rest of b. Encodings of -0 and of non-canonical NaNs are
// rejected: Append never produces them.
func DecodeFloat32(b []byte) (float32, []byte, error) {
	if len(b) < 4 {
		return 0, b, short(KindFloat32, 4, len(b))
	}
	k := binary.BigEndian.Uint32(b)
	bits := ^k
	if k&signBit32 != 0 {
		bits = k ^ signBit32
	}
	v := math.Float32frombits(bits)
	if float32Key(v) != k {
		return 0, b, malformed("float32 encoding %#08x is not canonical (negative zero or non-canonical NaN)", k)
	}
	return v, b[4:], nil
}

// DecodeFloat64 decodes a KindFloat64 component from the front of b and
// returns the rest of b. Encodings of -0 and of non-canonical NaNs are
// rejected: Append never produces them.
func DecodeFloat64(b []byte) (float64, []byte, error) {
	if len(b) < 8 {
		return 0, b, short(KindFloat64, 8, len(b))
	}
	k := binary.BigEndian.Uint64(b)
	bits := ^k
	if k&signBit64 != 0 {
		bits = k ^ signBit64
	}
	v := math.Float64frombits(bits)
	if float64Key(v) != k {
		return 0, b, malformed("float64 encoding %#016x is not canonical (negative zero or non-canonical NaN)", k)
	}
	return v, b[8:], nil
}

// scanEscaped validates the escaped string at the front of b and returns its
// unescaped length and the encoded length including the terminator.
func scanEscaped(b []byte) (n, end int, err error) {
	i := 0
	for {
		j := bytes.IndexByte(b[i:], escByte)
		if j < 0 {
			return 0, 0, malformed("string has no terminator in %d bytes", len(b))
		}
		i += j
		n += j
		if i+1 >= len(b) {
			return 0, 0, malformed("string ends in a lone 0x00 at offset %d", i)
		}
		switch b[i+1] {
		case escTerm:
			return n, i + 2, nil
		case escEscape:
			n++
			i += 2
		default:
			return 0, 0, malformed("string has invalid escape 0x00 %#02x at offset %d", b[i+1], i)
		}
	}
}

// DecodeBytes decodes a KindString or KindBytes component from the front of b
// into a freshly allocated slice (never nil, even when empty) and returns the
// rest of b.
func DecodeBytes(b []byte) ([]byte, []byte, error) {
	n, end, err := scanEscaped(b)
	if err != nil {
		return nil, b, err
	}
	return unescape(make([]byte, 0, n), b[:end]), b[end:], nil
}

// DecodeBytesAppend is DecodeBytes appending the unescaped bytes to dst, so
// callers decoding many keys can reuse one buffer.
func DecodeBytesAppend(dst, b []byte) ([]byte, []byte, error) {
	n, end, err := scanEscaped(b)
	if err != nil {
		return dst, b, err
	}
	return unescape(slices.Grow(dst, n), b[:end]), b[end:], nil
}

// unescape appends the unescaped content of enc, which scanEscaped has
// already validated and which ends with the terminator.
func unescape(dst, enc []byte) []byte {
	for {
		j := bytes.IndexByte(enc, escByte)
		dst = append(dst, enc[:j]...)
		if enc[j+1] == escTerm {
			return dst
		}
		dst = append(dst, escByte)
		enc = enc[j+2:]
	}
}

// DecodeString is DecodeBytes returning a string.
func DecodeString(b []byte) (string, []byte, error) {
	n, end, err := scanEscaped(b)
	if err != nil {
		return "", b, err
	}
	if n == end-2 { // no escapes: convert directly, one allocation
		return string(b[:n]), b[end:], nil
	}
	return string(unescape(make([]byte, 0, n), b[:end])), b[end:], nil
}

// Skip returns b without its leading component of kind k, validating it as
// Decode would but without allocating.
func Skip(b []byte, k Kind) ([]byte, error) {
	var err error
	switch k {
	case KindInt:
		_, b, err = DecodeInt(b)
	case KindUint:
		_, b, err = DecodeUint(b)
	case KindBool:
		_, b, err = DecodeBool(b)
	case KindFloat32:
		_, b, err = DecodeFloat32(b)
	case KindFloat64:
		_, b, err = DecodeFloat64(b)
	case KindString, KindBytes:
		var end int
		if _, end, err = scanEscaped(b); err == nil {
			b = b[end:]
		}
	default:
		err = malformed("unknown kind %d", uint8(k))
	}
	return b, err
}

// Decode decodes one component of kind k from the front of b and returns it
// with the rest of b. Value.Bytes is freshly allocated and never aliases b.
// On error the returned rest is b unchanged.
func Decode(b []byte, k Kind) (Value, []byte, error) {
	v := Value{Kind: k}
	var err error
	rest := b
	switch k {
	case KindInt:
		v.Int, rest, err = DecodeInt(b)
	case KindUint:
		v.Uint, rest, err = DecodeUint(b)
	case KindBool:
		v.Bool, rest, err = DecodeBool(b)
	case KindFloat32:
		var f float32
		f, rest, err = DecodeFloat32(b)
		v.Float = float64(f)
	case KindFloat64:
		v.Float, rest, err = DecodeFloat64(b)
	case KindString, KindBytes:
		v.Bytes, rest, err = DecodeBytes(b)
	default:
		err = malformed("unknown kind %d", uint8(k))
	}
	if err != nil {
		return Value{}, b, err
	}
	return v, rest, nil
}

// DecodeAll decodes a whole key consisting of exactly the given kinds. It
// fails if b is short, malformed, or has bytes left over. Errors name the
// failing component and its byte offset in b.
func DecodeAll(b []byte, kinds []Kind) ([]Value, error) {
	vals := make([]Value, len(kinds))
	rest := b
	for i, k := range kinds {
		var err error
		off := len(b) - len(rest)
		vals[i], rest, err = Decode(rest, k)
		if err != nil {
			return nil, fmt.Errorf("%w (component %d of %d, %v, at byte %d)", err, i, len(kinds), k, off)
		}
	}
	if len(rest) != 0 {
		return nil, malformed("%d trailing bytes after %d components", len(rest), len(kinds))
	}
	return vals, nil
}
