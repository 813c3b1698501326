package wire

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The write decoders: WriteRequest and WriteStreamRequest carry batches of
// records as google.protobuf.Any, and the generated decoder allocates three
// times per record (the Any, its type URL, a copy of its value). At batch
// 1,000 that was 3,000 allocations and as many small copies per request.
// These decode the records with Records, which points every record's
// value into the request's bytes: a handful of allocations per request,
// whatever its size. They never look inside a record; the engine
// validates records against their schema.
//
// They only take the common shape (known fields with their wire types,
// Anys holding only type_url and value) and hand anything else to
// proto.Unmarshal, so that their result is always what proto.Unmarshal
// produces (FuzzDecodeWriteRequest and FuzzDecodeWriteStreamRequest check it).

// DecodeWriteRequest decodes b into req, as proto.Unmarshal would. The
// records' values alias b: b must be the caller's own copy, never a
// transport buffer that is reused.
func DecodeWriteRequest(b []byte, req *pb.WriteRequest) error {
	recs, ok := decodeRecords(b, WriteRequestRecords, nil)
	if !ok {
		return proto.Unmarshal(b, req)
	}
	req.Reset()
	req.Records = recs
	return nil
}

// DecodeWriteStreamRequest decodes b into req, as proto.Unmarshal would.
// The records' values alias b, as in DecodeWriteRequest.
func DecodeWriteStreamRequest(b []byte, req *pb.WriteStreamRequest) error {
	var op pb.WriteOp
	var ack bool
	recs, ok := decodeRecords(b, WriteStreamRequestRecords, func(num protowire.Number, v uint64) bool {
		switch num {
		case WriteStreamRequestOp:
			op = pb.WriteOp(int32(v)) //nolint:gosec // enums are int32 on the wire; protobuf truncates the same way
		case WriteStreamRequestAck:
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
	var other OtherField
	if scalar != nil {
		other = func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) bool {
			return typ == protowire.VarintType && scalar(num, v)
		}
	}
	return DecodeRecords(b, records, other)
}
