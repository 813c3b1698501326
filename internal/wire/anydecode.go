package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
)

// DecodeAny sets a from b, the bytes of one google.protobuf.Any, checking
// and filling in one pass: for decoders of messages whose records are
// singular fields (a watch's Change holds up to three), where counting
// them first (CountRecords) would read every record twice. It reports whether b
// has the shape CountRecords accepts (see plain); on false a is partly set and
// the caller falls back to proto.Unmarshal. The value aliases b; the type
// URL is *last when equal, as in FillAny: *last is empty or a URL
// DecodeAny accepted before, so it is valid UTF-8 and an equal URL needs
// no check.
func DecodeAny(b []byte, a *anypb.Any, last *string) bool {
	for len(b) > 0 {
		var num protowire.Number
		var v []byte
		// Tags are one byte here; a length of one byte (up to 127) is
		// read without protowire's general decoding: a watcher decodes
		// two or three Anys per change, hundreds of thousands a second.
		if len(b) >= 2 && b[1] < 0x80 && (b[0] == 0x0a || b[0] == 0x12) {
			l := int(b[1])
			if l > len(b)-2 {
				return false
			}
			num, v, b = protowire.Number(b[0]>>3), b[2:2+l], b[2+l:]
		} else {
			var typ protowire.Type
			var l int
			num, typ, l = protowire.ConsumeTag(b)
			if l < 0 || typ != protowire.BytesType || (num != AnyTypeURL && num != AnyValue) {
				return false
			}
			var m int
			v, m = protowire.ConsumeBytes(b[l:])
			if m < 0 {
				return false
			}
			b = b[l+m:]
		}
		if num == AnyTypeURL {
			if string(v) != *last {
				if !utf8.Valid(v) {
					return false
				}
				*last = string(v)
			}
			a.TypeUrl = *last
			continue
		}
		// A full slice expression, as in FillAny.
		a.Value = v[:len(v):len(v)]
	}
	return true
}
