package engine

import (
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Op is a write operation.
type Op uint8

// The write operations.
const (
	OpInsert Op = iota + 1
	OpUpdate
	OpUpsert
	OpRemove
	OpPatch
	// opExpire deletes a record only while it has expired, and skips it
	// otherwise: the reaper's operation (reap.go), never a client's.
	opExpire
)

func (o Op) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpUpsert:
		return "upsert"
	case OpRemove:
		return "remove"
	case OpPatch:
		return "patch"
	case opExpire:
		return "expire"
	}
	return "unknown"
}

// OpFromProto maps the API's WriteOp.
func OpFromProto(op pb.WriteOp) (Op, bool) {
	switch op {
	case pb.WriteOp_WRITE_OP_INSERT:
		return OpInsert, true
	case pb.WriteOp_WRITE_OP_UPDATE:
		return OpUpdate, true
	case pb.WriteOp_WRITE_OP_UPSERT:
		return OpUpsert, true
	case pb.WriteOp_WRITE_OP_REMOVE:
		return OpRemove, true
	case pb.WriteOp_WRITE_OP_PATCH:
		return OpPatch, true
	}
	return 0, false
}

// Batch is one write batch as a transport hands it to Writer.Apply.
type Batch struct {
	Op      Op
	Records []*anypb.Any
	// Ops is the operation of each record, parallel to Records, when they
	// differ; empty means Op for every record.
	Ops []pb.WriteOp
	// Conditions must all hold, in the state the batch starts from, for
	// the batch to apply; they are checked atomically with its writes.
	Conditions []*pb.Condition
	// Fields and Add are an OpPatch batch's patch: the field paths its
	// records set, and the numeric fields whose values they add.
	Fields, Add []string
	// Ahead, when not nil, is phase 1 of Records done ahead (Ahead.Prepare),
	// which Apply uses when it still holds.
	Ahead *Ahead
}
