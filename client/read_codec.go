package client

import (
	"bytes"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The read codec decodes the responses that carry records by the million,
// ScanResponse and QueryResponse. The generated decoder allocates three
// times per record (the Any, its type URL, a copy of its value): a full
// Scan of 1,000,000 records made 3,000,000 allocations, and decoding was
// about a quarter of the Scan's CPU. decodeRecordsResponse copies the
// response's bytes once, points every record's value into that copy, takes
// the Any structs from one slab and shares one type URL string between the
// records that repeat it: four allocations per response, whatever its
// size. The cost is that a record kept by the caller keeps the bytes of
// its whole response (one batch or page) alive.
//
// It only takes the common shape (known fields with their wire types, no
// plan, Anys holding only type_url and value) and hands anything else to
// proto.Unmarshal, so that its result is always what proto.Unmarshal
// produces (FuzzDecodeRead checks it): same messages, same
// errors.

// Wire numbers of the responses decoded here.
const (
	fieldRespRecords = 1 // ScanResponse.records, QueryResponse.records

	fieldScanCount = 2 // ScanResponse.count
	fieldScanDone  = 3 // ScanResponse.done

	fieldQueryToken = 2 // QueryResponse.next_page_token
	fieldQueryCount = 4 // QueryResponse.count

	fieldAnyTypeURL = 1 // google.protobuf.Any.type_url
	fieldAnyValue   = 2 // google.protobuf.Any.value
)

var protoCodec = encoding.GetCodecV2("proto")

// readCodec is the codec of the Scan and Query calls: protobuf, with the
// fast decoder above for their responses. Its name is "proto", so the
// server sees ordinary protobuf.
type readCodec struct{}

// readCall makes a call use readCodec.
var readCall = grpc.ForceCodecV2(readCodec{})

// Name implements encoding.CodecV2.
func (readCodec) Name() string { return "proto" }

// Marshal implements encoding.CodecV2.
func (readCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

// Unmarshal implements encoding.CodecV2.
func (readCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *pb.ScanResponse:
		return decodeScanResponse(data.Materialize(), m)
	case *pb.QueryResponse:
		return decodeQueryResponse(data.Materialize(), m)
	}
	return protoCodec.Unmarshal(data, v)
}

// decodeScanResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy.
func decodeScanResponse(b []byte, m *pb.ScanResponse) error {
	var count uint64
	var done bool
	recs, ok := decodeRecordsResponse(b, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) bool {
		switch {
		case num == fieldScanCount && typ == protowire.VarintType:
			count = v
		case num == fieldScanDone && typ == protowire.VarintType:
			done = v != 0
		default:
			return false
		}
		return true
	})
	if !ok {
		return proto.Unmarshal(b, m)
	}
	m.Reset()
	m.Records, m.Count, m.Done = recs, count, done
	return nil
}

// decodeQueryResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy.
func decodeQueryResponse(b []byte, m *pb.QueryResponse) error {
	var count uint64
	var token []byte
	recs, ok := decodeRecordsResponse(b, func(num protowire.Number, typ protowire.Type, v uint64, s []byte) bool {
		switch {
		case num == fieldQueryCount && typ == protowire.VarintType:
			count = v
		case num == fieldQueryToken && typ == protowire.BytesType && utf8.Valid(s):
			token = s
		default:
			return false
		}
		return true
	})
	if !ok {
		return proto.Unmarshal(b, m)
	}
	m.Reset()
	m.Records, m.Count, m.NextPageToken = recs, count, string(token)
	return nil
}

// decodeRecordsResponse decodes the records (field 1, repeated Any) of a
// response b; every other field goes to other, with its varint value or
// its bytes, which must accept it. false means b is not of the common
// shape (or not valid), and the caller must use proto.Unmarshal.
func decodeRecordsResponse(b []byte, other func(num protowire.Number, typ protowire.Type, v uint64, s []byte) bool) ([]*anypb.Any, bool) {
	// First pass: check the shape and count the records, so that the
	// slabs are allocated once, at their size.
	n := 0
	var url []byte // the last type URL found valid
	for rest := b; len(rest) > 0; {
		num, typ, l := protowire.ConsumeTag(rest)
		if l < 0 {
			return nil, false
		}
		rest = rest[l:]
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(rest)
			if m < 0 {
				return nil, false
			}
			rest = rest[m:]
			if num == fieldRespRecords {
				if !plainAny(v, &url) {
					return nil, false
				}
				n++
			} else if !other(num, typ, 0, v) {
				return nil, false
			}
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(rest)
			if m < 0 || !other(num, typ, v, nil) {
				return nil, false
			}
			rest = rest[m:]
		default:
			return nil, false
		}
	}
	if n == 0 {
		return nil, true
	}
	slab := make([]anypb.Any, n)
	recs := make([]*anypb.Any, n)
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
		if num != fieldRespRecords {
			continue
		}
		a := &slab[i]
		fillAny(v, a, &lastURL)
		recs[i] = a
		i++
	}
	return recs, true
}

// plainAny reports whether b is an Any proto.Unmarshal would decode into
// type_url and value alone: those fields with their wire types, nothing
// unknown, a type URL of valid UTF-8. A repeated field is fine (the last
// one wins, in both decoders). *url is the last type URL checked, which
// the records of a response usually repeat.
func plainAny(b []byte, url *[]byte) bool {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 || typ != protowire.BytesType || (num != fieldAnyTypeURL && num != fieldAnyValue) {
			return false
		}
		v, m := protowire.ConsumeBytes(b[l:])
		if m < 0 {
			return false
		}
		if num == fieldAnyTypeURL && !bytes.Equal(v, *url) {
			if !utf8.Valid(v) {
				return false
			}
			*url = v
		}
		b = b[l+m:]
	}
	return true
}

// fillAny sets a from b, which plainAny accepted. The value aliases b; the
// type URL is *last when equal (records of one type share one string).
func fillAny(b []byte, a *anypb.Any, last *string) {
	for len(b) > 0 {
		num, _, l := protowire.ConsumeTag(b)
		v, m := protowire.ConsumeBytes(b[l:])
		b = b[l+m:]
		if num == fieldAnyTypeURL {
			if string(v) != *last {
				*last = string(v)
			}
			a.TypeUrl = *last
			continue
		}
		// A full slice expression: appending to a value must never write
		// over the next record.
		a.Value = v[:len(v):len(v)]
	}
}
