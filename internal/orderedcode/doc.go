// Package orderedcode owns the order-preserving byte encoding of typed values that
// protobase uses for Pebble keys. A primary key or secondary index key is the
// concatenation of its encoded components, so bytes.Compare on two keys equals
// the lexicographic order of their component values (as defined by Compare).
// Range scans, prefix scans and index lookups all rely on that equivalence.
//
// Encodings carry no type tags: decoding needs the schema's Kind sequence.
// Each component is either fixed width or self-delimiting, which is what lets
// components be concatenated without length prefixes.
//
//	Kind     Width     Encoding
//	-------  --------  ----------------------------------------------------------
//	Int      8         big-endian two's complement, sign bit flipped
//	Uint     8         big-endian
//	Bool     1         0x00 false, 0x01 true
//	Float32  4         IEEE 754 bits, big-endian; negative: all bits flipped,
//	                   otherwise sign bit flipped; -0 stored as +0, every NaN
//	                   stored as one canonical NaN that sorts after +Inf
//	Float64  8         as Float32
//	String   variable  each 0x00 byte escaped as 0x00 0xFF, then 0x00 0x01
//	Bytes    variable  identical to String
//
// The string terminator 0x00 0x01 sorts below every escaped continuation
// (a non-zero byte, or 0x00 0xFF), so a string sorts before all strings it is
// a proper prefix of, and a following component can never influence the
// comparison of two different strings.
//
// Decoding is strict: exactly one byte sequence is accepted per value (no
// negative zero, no other NaN payloads, no bool bytes other than 0 and 1, no
// escape other than 0x00 0xFF). Hence a successful decode re-encodes to the
// same bytes, and key equality is byte equality.
//
// The package is pure: no I/O and no mutable state.
package orderedcode
