package grpc

import (
	"bytes"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/grpcbuf"
)

// The write decoder: WriteRequest and WriteStreamRequest carry batches of
// records as google.protobuf.Any, and the generated decoder allocates three
// times per record (the Any, its type URL, a copy of its value). At batch
// 1,000 that was 3,000 allocations and as many small copies per request.
// decodeWrite copies the request's bytes once, points every record's
// value into that copy, takes the Any structs from one slab and shares one
// type URL string between the records that repeat it: a handful of
// allocations per request, whatever its size. It never looks inside a
// record; the engine validates records against their schema.
//
// Like decodeSearch it only takes the common shape (known fields with
// their wire types, Anys holding only type_url and value) and hands
// anything else to proto.Unmarshal, so that its result is always what
// proto.Unmarshal produces (FuzzDecodeWrite checks it).

// Wire numbers of the write requests.
const (
	fieldWriteRecords = 1 // WriteRequest.records

	fieldStreamOp      = 1 // WriteStreamRequest.op
	fieldStreamRecords = 2 // WriteStreamRequest.records
	fieldStreamAck     = 3 // WriteStreamRequest.ack

	fieldAnyTypeURL = 1 // google.protobuf.Any.type_url
	fieldAnyValue   = 2 // google.protobuf.Any.value
)

// decodeWriteRequest decodes b into req, as proto.Unmarshal would.
func decodeWriteRequest(b []byte, req *pb.WriteRequest) error {
	recs, ok := decodeRecords(b, fieldWriteRecords, nil)
	if !ok {
		return proto.Unmarshal(b, req)
	}
	req.Reset()
	req.Records = recs
	return nil
}

// decodeWriteStreamRequest decodes b into req, as proto.Unmarshal would.
func decodeWriteStreamRequest(b []byte, req *pb.WriteStreamRequest) error {
	var op pb.WriteOp
	var ack bool
	recs, ok := decodeRecords(b, fieldStreamRecords, func(num protowire.Number, v uint64) bool {
		switch num {
		case fieldStreamOp:
			op = pb.WriteOp(int32(v)) //nolint:gosec // enums are int32 on the wire; protobuf truncates the same way
		case fieldStreamAck:
			ack = v != 0
		default:
			return false
		}
		return true
	})
	if !ok {
		return proto.Unmarshal(b, req)
	}
	req.Reset()
	req.Op, req.Records, req.Ack = op, recs, ack
	return nil
}

// decodeRecords decodes the records (field records, repeated Any) of a
// write request b; every other field must be a varint that scalar accepts.
// false means b is not of the common shape (or not valid), and the caller
// must use proto.Unmarshal.
func decodeRecords(b []byte, records protowire.Number, scalar func(protowire.Number, uint64) bool) ([]*anypb.Any, bool) {
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
		switch {
		case num == records && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(rest)
			if m < 0 || !plainAny(v, &url) {
				return nil, false
			}
			rest = rest[m:]
			n++
		case typ == protowire.VarintType && scalar != nil:
			v, m := protowire.ConsumeVarint(rest)
			if m < 0 || !scalar(num, v) {
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
	// The records' values point into one copy of the request: the
	// transport's buffer is reused once the codec returns.
	own := append(make([]byte, 0, len(b)), b...)
	slab := make([]anypb.Any, n)
	recs := make([]*anypb.Any, n)
	var lastURL string
	i := 0
	for rest := own; len(rest) > 0; {
		num, typ, l := protowire.ConsumeTag(rest)
		rest = rest[l:]
		if num != records || typ != protowire.BytesType {
			_, m := protowire.ConsumeVarint(rest)
			rest = rest[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(rest)
		rest = rest[m:]
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
// the records of a batch usually repeat.
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
// type URL is *last when equal (a batch of one type shares one string).
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

// decodeWrite hands the bytes of a write request to decode, which keeps
// no reference to them.
func decodeWrite(data mem.BufferSlice, decode func([]byte) error) error {
	buf := data.MaterializeToBuffer(grpcbuf.Pool)
	defer buf.Free()
	return decode(buf.ReadOnlyData())
}
