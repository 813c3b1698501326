package grpc

import (
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/anywire"
	"github.com/protobase/protobase/internal/apiwire"
)

// The write decoder: WriteRequest and WriteStreamRequest carry batches of
// records as google.protobuf.Any, and the generated decoder allocates three
// times per record (the Any, its type URL, a copy of its value). At batch
// 1,000 that was 3,000 allocations and as many small copies per request.
// decodeWrite copies the request's bytes once and decodes its records
// with internal/anywire, which points every record's value into that
// copy: a handful of allocations per request, whatever its size. It never
// looks inside a record; the engine validates records against their schema.
//
// Like decodeSearch it only takes the common shape (known fields with
// their wire types, Anys holding only type_url and value) and hands
// anything else to proto.Unmarshal, so that its result is always what
// proto.Unmarshal produces (FuzzDecodeWrite checks it).

// decodeWriteRequest decodes b into req, as proto.Unmarshal would.
func decodeWriteRequest(b []byte, req *pb.WriteRequest) error {
	recs, ok := decodeRecords(b, apiwire.WriteRequestRecords, nil)
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
	recs, ok := decodeRecords(b, apiwire.WriteStreamRequestRecords, func(num protowire.Number, v uint64) bool {
		switch num {
		case apiwire.WriteStreamRequestOp:
			op = pb.WriteOp(int32(v)) //nolint:gosec // enums are int32 on the wire; protobuf truncates the same way
		case apiwire.WriteStreamRequestAck:
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
	var other anywire.Other
	if scalar != nil {
		other = func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) bool {
			return typ == protowire.VarintType && scalar(num, v)
		}
	}
	// The records' values point into b, the request's own copy
	// (decodeWrite).
	return anywire.Records(b, records, other)
}

// decodeWrite hands decode a copy of the bytes of a write request, which
// decode may keep (its records' values point into it). It is the one
// copy: the transport's buffers are freed once the codec returns, and
// a contiguous copy made first (MaterializeToBuffer) was a second copy of
// every request, as large as the request, held at once by every stream
// decoding one.
func decodeWrite(data mem.BufferSlice, decode func([]byte) error) error {
	own := make([]byte, data.Len())
	data.CopyTo(own)
	return decode(own)
}
