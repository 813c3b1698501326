package wire

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Condition's field numbers.
const (
	ConditionRecord     protowire.Number = 1
	ConditionKey        protowire.Number = 2
	ConditionQuery      protowire.Number = 3
	ConditionVersion    protowire.Number = 4
	ConditionFilter     protowire.Number = 5
	ConditionCount      protowire.Number = 6
	ConditionMaxVersion protowire.Number = 7
)

// decodeConditions decodes a write request's conditions, raw holding each
// one's bytes. A batch of conditional updates carries a condition per
// record, nearly always a record index and a version: those are decoded
// here into three allocations for the whole batch, where the generated
// decoder makes three per condition. Any other shape is handed, that
// condition alone, to proto.Unmarshal. false means a condition is not
// valid.
func decodeConditions(raw [][]byte) ([]*pb.Condition, bool) {
	if len(raw) == 0 {
		return nil, true
	}
	n := len(raw)
	conds, targets, versions := make([]pb.Condition, n), make([]pb.Condition_Record, n), make([]uint64, n)
	out := make([]*pb.Condition, n)
	for i, s := range raw {
		c := &conds[i]
		out[i] = c
		if decodeRecordCondition(s, c, &targets[i], &versions[i]) {
			continue
		}
		if proto.Unmarshal(s, c) != nil {
			return nil, false
		}
	}
	return out, true
}

// decodeRecordCondition decodes s into c when it holds only a record index
// and a version (varints, each any number of times: the last wins, as in
// proto.Unmarshal), using target and version for c's fields.
func decodeRecordCondition(s []byte, c *pb.Condition, target *pb.Condition_Record, version *uint64) bool {
	var rec, ver bool
	for len(s) > 0 {
		num, typ, n := protowire.ConsumeTag(s)
		if n < 0 || typ != protowire.VarintType {
			return false
		}
		s = s[n:]
		v, m := protowire.ConsumeVarint(s)
		if m < 0 {
			return false
		}
		s = s[m:]
		switch num {
		case ConditionRecord:
			target.Record, rec = uint32(v), true //nolint:gosec // uint32 on the wire; protobuf truncates the same way
		case ConditionVersion:
			*version, ver = v, true
		default:
			return false
		}
	}
	if rec {
		c.Target = target
	}
	if ver {
		c.Version = version
	}
	return true
}
