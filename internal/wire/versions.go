package wire

import "google.golang.org/protobuf/encoding/protowire"

// Record versions travel beside the records of a read's response as a
// repeated uint64 field, which proto.Marshal writes packed: one tag, the
// length, the varints. The encoders write them that way; the decoders take
// packed fields only (as many as come, appended in order, as
// proto.Unmarshal does) and leave an unpacked one to proto.Unmarshal.

// sizePacked is the encoded size of a packed field holding vs, with its
// tag of one byte; 0 for none.
func sizePacked[T uint32 | uint64](vs []T) int {
	if len(vs) == 0 {
		return 0
	}
	n := packedLen(vs)
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

// packedLen is the length of the varints of vs.
func packedLen[T uint32 | uint64](vs []T) int {
	n := 0
	for _, v := range vs {
		n += protowire.SizeVarint(uint64(v))
	}
	return n
}

// appendPacked appends vs as packed field num; nothing for none.
func appendPacked[T uint32 | uint64](b []byte, num protowire.Number, vs []T) []byte {
	if len(vs) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(packedLen(vs)))
	for _, v := range vs {
		b = protowire.AppendVarint(b, uint64(v))
	}
	return b
}

// AppendVersions appends a ResultBatch.versions field holding vs (nothing
// for none): the engine's search writers write it after a batch's records.
func AppendVersions(b []byte, vs []uint64) []byte {
	return appendPacked(b, ResultBatchVersions, vs)
}

// SizeVersions is what AppendVersions appends for vs.
func SizeVersions(vs []uint64) int { return sizePacked(vs) }

// readPacked appends the varints of the packed field content b to dst,
// a uint32 keeping the low 32 bits as proto.Unmarshal does; ok is false
// when b is not a whole number of well-formed varints.
func readPacked[T uint32 | uint64](dst []T, b []byte) ([]T, bool) {
	for len(b) > 0 {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return dst, false
		}
		dst = append(dst, T(v))
		b = b[n:]
	}
	return dst, true
}

// validPacked reports whether b is a whole number of well-formed varints,
// without keeping them.
func validPacked(b []byte) bool {
	for len(b) > 0 {
		_, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}
