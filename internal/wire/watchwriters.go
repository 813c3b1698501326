package wire

import "google.golang.org/protobuf/encoding/protowire"

// internal/watch writes its WatchResponses straight from change-log
// entries, with the field writers of fieldwriters.go and these writers of
// a Position, the one part of a response that is not a record's bytes or
// a type's encoded names (TestWatchEncodeMatchesProto holds the bytes to
// proto.Marshal's, TestPositionWritersMatchProto the Position's).

// MaxPositionField bounds the size of a Position field of a number under
// 16: its tag, its length, and two fields of at most 1 + 10 bytes.
const MaxPositionField = 2 + 2*11

// SizePosition is the size of the Position of commit c whose optional
// index is present when hasIndex.
func SizePosition(c uint64, index uint32, hasIndex bool) int {
	size := 0
	if c != 0 {
		size += 1 + protowire.SizeVarint(c)
	}
	if hasIndex {
		size += 1 + protowire.SizeVarint(uint64(index))
	}
	return size
}

// AppendPosition appends field num holding the Position of commit c whose
// optional index is present when hasIndex.
func AppendPosition(b []byte, num protowire.Number, c uint64, index uint32, hasIndex bool) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(SizePosition(c, index, hasIndex)))
	if c != 0 {
		b = protowire.AppendTag(b, PositionCommit, protowire.VarintType)
		b = protowire.AppendVarint(b, c)
	}
	if hasIndex {
		b = protowire.AppendTag(b, PositionIndex, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(index))
	}
	return b
}
