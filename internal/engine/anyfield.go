package engine

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/protobase/protobase/internal/anywire"
)

// Fields written by hand: an Any from its type's encoded type_url field
// (recType.urlField) and the record's bytes, for the search encoder
// (searchenc.go), and the string field the catalog encodes the type URL
// as. Watch responses are encoded the same way by internal/watch
// (encode.go), which holds its own copy.

const tagAnyValue = byte(anywire.FieldValue)<<3 | byte(protowire.BytesType)

// sizeAnyF is the size of an Any whose encoded type_url field takes uf
// bytes, holding n bytes of value.
func sizeAnyF(uf, n int) int {
	if n > 0 {
		uf += 1 + protowire.SizeVarint(uint64(n)) + n
	}
	return uf
}

// appendAnyF appends field tag holding an Any of size bytes (sizeAnyF):
// the encoded type_url field urlField and the value v.
func appendAnyF(b []byte, tag byte, size int, urlField, v []byte) []byte {
	b = append(b, tag)
	b = appendVarint(b, uint64(size))
	b = append(b, urlField...)
	if len(v) > 0 {
		b = append(b, tagAnyValue)
		b = appendVarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

// appendVarint is protowire.AppendVarint with the one- and two-byte
// values (lengths, indexes) inlined.
func appendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<7:
		return append(b, byte(v))
	case v < 1<<14:
		return append(b, byte(v)|0x80, byte(v>>7))
	}
	return protowire.AppendVarint(b, v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
