package engine

import pb "github.com/protobase/protobase/gen/protobase/v1"

// Op is a write operation.
type Op uint8

// The write operations.
const (
	OpInsert Op = iota + 1
	OpUpdate
	OpUpsert
	OpRemove
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
	}
	return 0, false
}
