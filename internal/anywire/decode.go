package anywire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
)

// Decode sets a from b, the bytes of one google.protobuf.Any, checking
// and filling in one pass: for decoders of messages whose records are
// singular fields (a watch's Change holds up to three), where counting
// them first (Count) would read every record twice. It reports whether b
// has the shape Count accepts (see plain); on false a is partly set and
// the caller falls back to proto.Unmarshal. The value aliases b; the type
// URL is *last when equal, as in Fill.
func Decode(b []byte, a *anypb.Any, last *string) bool {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 || typ != protowire.BytesType || (num != FieldTypeURL && num != FieldValue) {
			return false
		}
		v, m := protowire.ConsumeBytes(b[l:])
		if m < 0 {
			return false
		}
		b = b[l+m:]
		if num == FieldTypeURL {
			if string(v) != *last {
				if !utf8.Valid(v) {
					return false
				}
				*last = string(v)
			}
			a.TypeUrl = *last
			continue
		}
		// A full slice expression, as in Fill.
		a.Value = v[:len(v):len(v)]
	}
	return true
}
