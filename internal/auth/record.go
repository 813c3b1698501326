package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// record is a stored key: everything but the key itself. Its encoding is
// protobuf wire format (fields below), so fields can be added later.
//
//	1 name (string)  2 role (varint)  3 types (repeated string)
//	4 sha256 of the key (bytes)  5 created, Unix nanoseconds (varint)
type record struct {
	name    string
	role    Role
	types   []string
	hash    [sha256.Size]byte
	created time.Time
}

func (r *record) encode() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, r.name)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(r.role))
	for _, t := range r.types {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, t)
	}
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendBytes(b, r.hash[:])
	b = protowire.AppendTag(b, 5, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(r.created.UnixNano()))
	return b
}

func decodeRecord(b []byte) (*record, error) {
	r := &record{}
	var hashSeen bool
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var u uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			u, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		switch num {
		case 1:
			r.name = string(v)
		case 2:
			r.role = Role(u)
		case 3:
			r.types = append(r.types, string(v))
		case 4:
			if len(v) != sha256.Size {
				return nil, errors.New("key hash has the wrong length")
			}
			copy(r.hash[:], v)
			hashSeen = true
		case 5:
			r.created = time.Unix(0, int64(u)).UTC()
		}
	}
	if !hashSeen || r.name == "" || r.role == RoleNone || r.role > RoleAdmin {
		return nil, fmt.Errorf("key record %q is incomplete", r.name)
	}
	return r, nil
}
