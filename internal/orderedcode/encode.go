package orderedcode

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is the type of one key component.
type Kind uint8

const (
	// KindInt holds int32, int64, sint32/64, sfixed32/64 and enum values,
	// widened to int64 so that every signed field shares one encoding.
	KindInt Kind = iota + 1
	// KindUint holds uint32, uint64, fixed32 and fixed64 values.
	KindUint
	KindBool
	KindFloat32
	KindFloat64
	KindString
	KindBytes
)

// String returns the lower-case kind name, or "Kind(N)" for unknown kinds.
func (k Kind) String() string {
	switch k {
	case KindInt:
		return "int"
	case KindUint:
		return "uint"
	case KindBool:
		return "bool"
	case KindFloat32:
		return "float32"
	case KindFloat64:
		return "float64"
	case KindString:
		return "string"
	case KindBytes:
		return "bytes"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Valid reports whether k is one of the defined kinds.
func (k Kind) Valid() bool { return k >= KindInt && k <= KindBytes }

// Value is one decoded key component. Only the field matching Kind is
// meaningful: Int for KindInt, Uint for KindUint, Bool for KindBool, Float for
// KindFloat32 and KindFloat64, Bytes for KindString and KindBytes.
//
// A KindFloat32 value keeps its number in Float; it is rounded to float32
// when encoded and compared, so Compare and the encoding agree even if Float
// is not exactly representable as a float32.
type Value struct {
	Kind  Kind
	Int   int64
	Uint  uint64
	Float float64
	Bool  bool
	Bytes []byte
}

// Int returns a KindInt value.
func Int(v int64) Value { return Value{Kind: KindInt, Int: v} }

// Uint returns a KindUint value.
func Uint(v uint64) Value { return Value{Kind: KindUint, Uint: v} }

// Bool returns a KindBool value.
func Bool(v bool) Value { return Value{Kind: KindBool, Bool: v} }

// Float32 returns a KindFloat32 value.
func Float32(v float32) Value { return Value{Kind: KindFloat32, Float: float64(v)} }

// Float64 returns a KindFloat64 value.
func Float64(v float64) Value { return Value{Kind: KindFloat64, Float: v} }

// String returns a KindString value. It copies s.
func String(s string) Value { return Value{Kind: KindString, Bytes: []byte(s)} }

// Bytes returns a KindBytes value. It does not copy b.
func Bytes(b []byte) Value { return Value{Kind: KindBytes, Bytes: b} }

// String formats v for diagnostics, e.g. int(-1) or string("a\x00").
func (v Value) String() string {
	switch v.Kind {
	case KindInt:
		return "int(" + strconv.FormatInt(v.Int, 10) + ")"
	case KindUint:
		return "uint(" + strconv.FormatUint(v.Uint, 10) + ")"
	case KindBool:
		return "bool(" + strconv.FormatBool(v.Bool) + ")"
	case KindFloat32:
		return "float32(" + strconv.FormatFloat(v.Float, 'g', -1, 32) + ")"
	case KindFloat64:
		return "float64(" + strconv.FormatFloat(v.Float, 'g', -1, 64) + ")"
	case KindString, KindBytes:
		return v.Kind.String() + "(" + strconv.Quote(string(v.Bytes)) + ")"
	}
	return v.Kind.String() + "(?)"
}

// Compare returns -1, 0 or +1 as a sorts before, equal to or after b. This is
// the order the encoding preserves: for values of the same kind,
// bytes.Compare(Append(nil, a), Append(nil, b)) == Compare(a, b).
//
// Floats: -0 equals +0, NaN equals NaN and sorts after every other value
// (including +Inf). KindFloat32 values are compared after rounding to
// float32. Strings and bytes compare as byte strings.
//
// Values of different kinds are ordered by Kind so that Compare is a total
// order; the encoding does not preserve that, because keys carry no kind tags.
func Compare(a, b Value) int {
	if a.Kind != b.Kind {
		return cmp.Compare(a.Kind, b.Kind)
	}
	switch a.Kind {
	case KindInt:
		return cmp.Compare(a.Int, b.Int)
	case KindUint:
		return cmp.Compare(a.Uint, b.Uint)
	case KindBool:
		return compareBool(a.Bool, b.Bool)
	case KindFloat32:
		return compareFloat(float64(float32(a.Float)), float64(float32(b.Float)))
	case KindFloat64:
		return compareFloat(a.Float, b.Float)
	case KindString, KindBytes:
		return bytes.Compare(a.Bytes, b.Bytes)
	}
	return 0
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// compareFloat differs from cmp.Compare only in placing NaN last rather than
// first: NaN must sort after +Inf so that a scan from -Inf to +Inf never
// touches it, and "greater than x" scans find it at the end.
func compareFloat(a, b float64) int {
	aNaN, bNaN := a != a, b != b
	switch {
	case aNaN && bNaN:
		return 0
	case aNaN:
		return 1
	case bNaN:
		return -1
	}
	return cmp.Compare(a, b)
}

const (
	signBit64 = 1 << 63
	signBit32 = 1 << 31

	// The quiet NaNs with no payload; any NaN maps here so that equal
	// (NaN == NaN) values have equal keys.
	canonicalNaN64 = 0x7FF8_0000_0000_0000
	canonicalNaN32 = 0x7FC0_0000

	// Escaping 0x00 as 0x00 0xFF and terminating with 0x00 0x01 keeps the
	// terminator below any continuation of the string, so shorter prefixes
	// sort first and the component is self-delimiting.
	escByte   = 0x00
	escEscape = 0xFF
	escTerm   = 0x01
)

// AppendInt appends the 8-byte encoding of v. Flipping the sign bit turns
// two's complement order into unsigned byte order.
func AppendInt(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^signBit64)
}

// AppendUint appends the 8-byte big-endian encoding of v.
func AppendUint(dst []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, v)
}

// AppendBool appends 0x00 for false and 0x01 for true.
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// AppendFloat32 appends the 4-byte encoding of v.
func AppendFloat32(dst []byte, v float32) []byte {
	return binary.BigEndian.AppendUint32(dst, float32Key(v))
}

// AppendFloat64 appends the 8-byte encoding of v.
func AppendFloat64(dst []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(dst, float64Key(v))
}

// float64Key maps v to an unsigned integer with the same order as
// compareFloat. Negative numbers have their magnitude order reversed by
// flipping all bits (which also clears the sign bit so they sort below
// positives); non-negative numbers just get the sign bit set.
func float64Key(v float64) uint64 {
	if v != v {
		return canonicalNaN64 ^ signBit64
	}
	if v == 0 { // -0 == +0, so they must share a key
		return signBit64
	}
	b := math.Float64bits(v)
	if b&signBit64 != 0 {
		return ^b
	}
	return b ^ signBit64
}

// float32Key is float64Key for float32.
func float32Key(v float32) uint32 {
	if v != v {
		return canonicalNaN32 ^ signBit32
	}
	if v == 0 {
		return signBit32
	}
	b := math.Float32bits(v)
	if b&signBit32 != 0 {
		return ^b
	}
	return b ^ signBit32
}

// AppendString appends the escaped, terminated encoding of s.
func AppendString(dst []byte, s string) []byte {
	return append(appendEscapedString(dst, s), escByte, escTerm)
}

// AppendBytes appends the escaped, terminated encoding of b; it is byte for
// byte the same as AppendString(dst, string(b)).
func AppendBytes(dst []byte, b []byte) []byte {
	return append(appendEscaped(dst, b), escByte, escTerm)
}

// AppendStringPrefix appends s escaped but without the terminator. For every
// string or bytes value x, the encoding of x (and of any key continuing after
// it) starts with this output if and only if x starts with s. A PREFIX query
// therefore scans [out, PrefixEnd(out)).
func AppendStringPrefix(dst []byte, s []byte) []byte {
	return appendEscaped(dst, s)
}

// appendEscaped and appendEscapedString copy the runs between 0x00 bytes in
// bulk (IndexByte is vectorized), since most keys contain no 0x00 at all.
func appendEscaped(dst []byte, s []byte) []byte {
	for {
		i := bytes.IndexByte(s, escByte)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, escEscape)
		s = s[i+1:]
	}
}

func appendEscapedString(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, escByte)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, escEscape)
		s = s[i+1:]
	}
}

// Append appends the encoding of v according to v.Kind. It panics if v.Kind
// is not a defined kind, which is a schema bug rather than a data error.
func Append(dst []byte, v Value) []byte {
	switch v.Kind {
	case KindInt:
		return AppendInt(dst, v.Int)
	case KindUint:
		return AppendUint(dst, v.Uint)
	case KindBool:
		return AppendBool(dst, v.Bool)
	case KindFloat32:
		return AppendFloat32(dst, float32(v.Float))
	case KindFloat64:
		return AppendFloat64(dst, v.Float)
	case KindString, KindBytes:
		return AppendBytes(dst, v.Bytes)
	}
	panic(fmt.Sprintf("keys: Append of invalid kind %d", uint8(v.Kind)))
}

// PrefixEnd returns the smallest key greater than every key having prefix p,
// i.e. the exclusive upper bound of a prefix scan. It returns nil when no
// such key exists (p is empty or all 0xFF), meaning the scan is unbounded.
// The result is freshly allocated.
func PrefixEnd(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xFF {
			end := make([]byte, i+1)
			copy(end, p)
			end[i]++
			return end
		}
	}
	return nil
}
