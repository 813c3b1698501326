package engine

import (
	"encoding/binary"
)

// The key space of the store. Every key starts with a one-byte space tag, so
// the spaces never interleave and each can be range-deleted on its own:
//
//	0x00 "schema"                         -> encoded schema.State
//	0x00 "seq"                            -> last commit sequence (8 bytes BE)
//	0x01 typeID(4 BE) pk                  -> record bytes, exactly as received
//	0x02 indexID(4 BE) ixkey pk           -> empty            (non-unique index)
//	0x02 indexID(4 BE) ixkey              -> pk               (unique index)
//
// pk and ixkey are internal/keys encodings of the key fields; they are
// self-delimiting, so a non-unique entry's pk is the suffix after ixkey.
const (
	spaceMeta   = 0x00
	spaceRecord = 0x01
	spaceIndex  = 0x02
)

var (
	keySchema = []byte{spaceMeta, 's', 'c', 'h', 'e', 'm', 'a'}
	keySeq    = []byte{spaceMeta, 's', 'e', 'q'}
)

// recordPrefix is the prefix of every record key of a type.
func recordPrefix(typeID uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{spaceRecord}, typeID)
}

// indexPrefix is the prefix of every entry of an index.
func indexPrefix(indexID uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{spaceIndex}, indexID)
}

// prefixEnd is the exclusive upper bound of the keys starting with a
// space-and-id prefix; ids are below 2^32-1 so the increment never carries
// out of the id.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
