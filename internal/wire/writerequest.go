package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

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
	var raw [][]byte
	recs, ok := DecodeRecords(b, WriteRequestRecords, func(num protowire.Number, typ protowire.Type, _ uint64, s []byte) bool {
		if num != WriteRequestConditions || typ != protowire.BytesType {
			return false
		}
		raw = append(raw, s)
		return true
	})
	var conds []*pb.Condition
	if ok {
		conds, ok = decodeConditions(raw)
	}
	if !ok {
		return proto.Unmarshal(b, req)
	}
	req.Reset()
	req.Records, req.Conditions = recs, conds
	return nil
}

// DecodeWriteStreamRequest decodes b into req, as proto.Unmarshal would.
// The records' values alias b, as in DecodeWriteRequest.
func DecodeWriteStreamRequest(b []byte, req *pb.WriteStreamRequest) error {
	var d streamRequest
	recs, ok := DecodeRecords(b, WriteStreamRequestRecords, d.field)
	if ok {
		d.conds, ok = decodeConditions(d.raw)
	}
	if !ok {
		return proto.Unmarshal(b, req)
	}
	req.Reset()
	req.Op, req.Records, req.Ack = d.op, recs, d.ack
	req.Conditions, req.Fields, req.Add, req.Ops = d.conds, d.fields, d.add, d.ops
	return nil
}

// streamRequest collects the fields of a WriteStreamRequest other than its
// records.
type streamRequest struct {
	op          pb.WriteOp
	ack         bool
	raw         [][]byte // each condition's bytes
	conds       []*pb.Condition
	fields, add []string
	ops         []pb.WriteOp
}

func (d *streamRequest) field(num protowire.Number, typ protowire.Type, v uint64, s []byte) bool {
	if typ == protowire.VarintType {
		switch num {
		case WriteStreamRequestOp:
			d.op = pb.WriteOp(int32(v)) //nolint:gosec // enums are int32 on the wire; protobuf truncates the same way
		case WriteStreamRequestAck:
			d.ack = v != 0
		case WriteStreamRequestOps:
			d.ops = append(d.ops, pb.WriteOp(int32(v))) //nolint:gosec // as op
		default:
			return false
		}
		return true
	}
	if typ != protowire.BytesType {
		return false
	}
	switch num {
	case WriteStreamRequestConditions:
		d.raw = append(d.raw, s)
		return true
	case WriteStreamRequestFields:
		return appendString(&d.fields, s)
	case WriteStreamRequestAdd:
		return appendString(&d.add, s)
	case WriteStreamRequestOps:
		return d.appendPackedOps(s)
	}
	return false
}

// appendPackedOps takes a packed run of operations.
func (d *streamRequest) appendPackedOps(s []byte) bool {
	for len(s) > 0 {
		v, n := protowire.ConsumeVarint(s)
		if n < 0 {
			return false
		}
		d.ops = append(d.ops, pb.WriteOp(int32(v))) //nolint:gosec // as op
		s = s[n:]
	}
	return true
}

// appendString takes a string field; invalid UTF-8 goes to proto.Unmarshal,
// which refuses it as it refuses any proto3 string.
func appendString(list *[]string, s []byte) bool {
	if !utf8.Valid(s) {
		return false
	}
	*list = append(*list, string(s))
	return true
}
