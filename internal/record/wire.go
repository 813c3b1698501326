package record

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// Negative lengths returned by the helpers below, mirroring protowire's
// convention so callers can branch on n < 0 in the hot path and only turn the
// code into a message when reporting.
const (
	errTruncated = -1
	errOverflow  = -2
)

// consumeVarint is protowire.ConsumeVarint with the one-byte case inlined,
// which covers most tags and small integers.
func consumeVarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		if len(b) >= 10 {
			return 0, errOverflow
		}
		return 0, errTruncated
	}
	return v, n
}

// skipVarint returns the length of the varint at the start of b with the same
// acceptance rules as protowire.ConsumeVarint (at most 10 bytes, and the 10th
// may only carry the top bit), without assembling the value.
func skipVarint(b []byte) int {
	for i := 0; i < len(b) && i < 10; i++ {
		if c := b[i]; c < 0x80 {
			if i == 9 && c > 1 {
				return errOverflow
			}
			return i + 1
		}
	}
	if len(b) >= 10 {
		return errOverflow
	}
	return errTruncated
}

// consumeBytes reads a length prefix and returns the payload it delimits and
// the total length consumed.
func consumeBytes(b []byte) ([]byte, int) {
	m, n := consumeVarint(b)
	if n < 0 {
		return nil, n
	}
	if m > uint64(len(b)-n) {
		return nil, errTruncated
	}
	return b[n : n+int(m)], n + int(m)
}

// skipField returns the length of the value of a field with wire type wt at
// the start of b, for fields a reader is not interested in. Groups are walked
// by protowire, which bounds its own recursion.
func skipField(num protowire.Number, wt protowire.Type, b []byte) (int, string) {
	switch wt {
	case protowire.VarintType:
		n := skipVarint(b)
		if n < 0 {
			return 0, varintReason(n)
		}
		return n, ""
	case protowire.Fixed32Type:
		if len(b) < 4 {
			return 0, "truncated fixed32 value"
		}
		return 4, ""
	case protowire.Fixed64Type:
		if len(b) < 8 {
			return 0, "truncated fixed64 value"
		}
		return 8, ""
	case protowire.BytesType:
		_, n := consumeBytes(b)
		if n < 0 {
			return 0, bytesReason(n)
		}
		return n, ""
	case protowire.StartGroupType:
		n := protowire.ConsumeFieldValue(num, wt, b)
		if n < 0 {
			return 0, "malformed group: " + protowire.ParseError(n).Error()
		}
		return n, ""
	case protowire.EndGroupType:
		return 0, "unexpected end-group tag"
	}
	return 0, "invalid wire type " + wireTypeName(wt)
}

func varintReason(code int) string {
	if code == errOverflow {
		return "varint overflows 64 bits"
	}
	return "truncated varint"
}

func bytesReason(code int) string {
	if code == errOverflow {
		return "invalid length prefix"
	}
	return "truncated length-delimited value"
}

func tagReason(code int) string {
	if code == errOverflow {
		return "invalid tag varint"
	}
	return "truncated tag"
}
