package wire

import (
	"bytes"
	"sync/atomic"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
)

// Messages that carry records by the thousand as a repeated
// google.protobuf.Any (write requests; Scan, Query and Search responses)
// are decoded with DecodeRecords, CountRecords and FillAny. The generated decoder
// allocates three times per record (the Any, its type URL, a copy of its
// value). DecodeRecords points every record's value into the message's bytes,
// takes the Any structs from one slab and shares one type URL string
// between the records that repeat it, and with the messages decoded before
// (recent): at most two allocations per message, whatever its size, and one
// for a lone record. It only takes the common shape (known fields with
// their wire types, Anys holding only type_url and value); for anything
// else it says no, and the caller falls back to proto.Unmarshal, so that
// what callers produce is always what proto.Unmarshal produces.

// OtherField accepts a field of the message other than the records: a varint
// (v) or a length-delimited field (s). It returns false for a field the
// caller does not know, which sends the message to proto.Unmarshal.
type OtherField func(num protowire.Number, typ protowire.Type, v uint64, s []byte) bool

// DecodeRecords decodes the records (field, repeated Any) of the message b and
// passes every other varint or length-delimited field to other (nil: there
// are none). false means b is not of the common shape, or not valid, and
// the caller must use proto.Unmarshal. The records alias b: b must be the
// caller's own copy, never a transport buffer that is reused.
func DecodeRecords(b []byte, field protowire.Number, other OtherField) ([]*anypb.Any, bool) {
	n, ok := CountRecords(b, field, other)
	if !ok || n == 0 {
		return nil, ok
	}
	var slab []anypb.Any
	var recs []*anypb.Any
	if n == 1 {
		// A lone record (a one-key Get's answer): its Any and the slice
		// pointing to it in one allocation.
		one := new(struct {
			any [1]anypb.Any
			rec [1]*anypb.Any
		})
		slab, recs = one.any[:], one.rec[:]
	} else {
		slab, recs = make([]anypb.Any, n), make([]*anypb.Any, n)
	}
	var lastURL string
	i := 0
	for rest := b; len(rest) > 0; {
		num, typ, l := protowire.ConsumeTag(rest)
		rest = rest[l:]
		if typ == protowire.VarintType {
			_, m := protowire.ConsumeVarint(rest)
			rest = rest[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(rest)
		rest = rest[m:]
		if num != field {
			continue
		}
		a := &slab[i]
		FillAny(v, a, &lastURL)
		recs[i] = a
		i++
	}
	return recs, true
}

// recent makes strings of bytes that mostly repeat from one message to the
// next (a type name, a type URL), returning the string it made last when
// the bytes are the same: a process decodes records of a few types, mostly
// one after another. Safe for concurrent use.
type recent struct{ last atomic.Pointer[string] }

func (r *recent) of(b []byte) string {
	if p := r.last.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	r.last.Store(&s)
	return s
}

// recentURLs are the records' type URLs (FillAny).
var recentURLs recent

// CountRecords is DecodeRecords' first pass, for callers that decode the records of
// several messages into slabs of their own: it checks the shape of b as
// DecodeRecords does and counts its records, so that slabs are allocated once,
// at their size. FillAny then decodes each record CountRecords accepted.
func CountRecords(b []byte, field protowire.Number, other OtherField) (n int, ok bool) {
	var url []byte // the last type URL found valid
	for rest := b; len(rest) > 0; {
		num, typ, l := protowire.ConsumeTag(rest)
		if l < 0 {
			return 0, false
		}
		rest = rest[l:]
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(rest)
			if m < 0 {
				return 0, false
			}
			rest = rest[m:]
			if num == field {
				if !plain(v, &url) {
					return 0, false
				}
				n++
			} else if other == nil || !other(num, typ, 0, v) {
				return 0, false
			}
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(rest)
			if m < 0 || other == nil || !other(num, typ, v, nil) {
				return 0, false
			}
			rest = rest[m:]
		default:
			return 0, false
		}
	}
	return n, true
}

// plain reports whether b is an Any proto.Unmarshal would decode into
// type_url and value alone: those fields with their wire types, nothing
// unknown, a type URL of valid UTF-8. A repeated field is fine (the last
// one wins, in both decoders). *url is the last type URL checked, which
// the records of a message usually repeat.
func plain(b []byte, url *[]byte) bool {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 || typ != protowire.BytesType || (num != AnyTypeURL && num != AnyValue) {
			return false
		}
		v, m := protowire.ConsumeBytes(b[l:])
		if m < 0 {
			return false
		}
		if num == AnyTypeURL && !bytes.Equal(v, *url) {
			if !utf8.Valid(v) {
				return false
			}
			*url = v
		}
		b = b[l+m:]
	}
	return true
}

// FillAny sets a from b, the bytes of one record that CountRecords accepted. The
// value aliases b; the type URL is *last when equal (records of one type
// share one string), so pass the same *last for every record of a slab; a
// URL other than *last comes from recentURLs, so that messages in a row
// share it too.
func FillAny(b []byte, a *anypb.Any, last *string) {
	for len(b) > 0 {
		num, _, l := protowire.ConsumeTag(b)
		v, m := protowire.ConsumeBytes(b[l:])
		b = b[l+m:]
		if num == AnyTypeURL {
			if string(v) != *last {
				*last = recentURLs.of(v)
			}
			a.TypeUrl = *last
			continue
		}
		// A full slice expression: appending to a value must never write
		// over the next record.
		a.Value = v[:len(v):len(v)]
	}
}
