package wire

import "google.golang.org/protobuf/encoding/protowire"

// Writers of single fields for the encoders that write a message straight
// from a record's bytes (the engine's search responses, searchwriters.go,
// and internal/watch's WatchResponse): an Any is written from its type's
// encoded type_url field, made once per record type with AppendString,
// and the record's bytes.

// tagAnyValue is Any.value's tag, as a byte.
const tagAnyValue = byte(AnyValue)<<3 | byte(protowire.BytesType)

// SizeAny is the size of an Any whose encoded type_url field takes uf
// bytes, holding n bytes of value.
func SizeAny(uf, n int) int {
	if n > 0 {
		uf += 1 + protowire.SizeVarint(uint64(n)) + n
	}
	return uf
}

// AppendAnyField appends the field whose one-byte tag is tag holding an
// Any of size bytes (SizeAny): the encoded type_url field urlField and
// the value v.
func AppendAnyField(b []byte, tag byte, size int, urlField, v []byte) []byte {
	b = append(b, tag)
	b = AppendVarint(b, uint64(size))
	b = append(b, urlField...)
	if len(v) > 0 {
		b = append(b, tagAnyValue)
		b = AppendVarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

// AppendVarint is protowire.AppendVarint with the one- and two-byte
// values (lengths, indexes) written without a call.
func AppendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<7:
		return append(b, byte(v))
	case v < 1<<14:
		return append(b, byte(v)|0x80, byte(v>>7))
	}
	return protowire.AppendVarint(b, v)
}

// SizeString is the size of string field num holding s (none when empty,
// as proto3 omits it).
func SizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// AppendString appends string field num holding s, nothing when s is
// empty.
func AppendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
