package concurrency

import (
	_ "embed"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
)

//go:embed rows.proto
var rowsProto string

const (
	rowURL     = "type.googleapis.com/protobase_lab.concurrency.Row"
	counterURL = "type.googleapis.com/protobase_lab.concurrency.Counter"
	// fieldBytes is the size of each of a Row's ten fields, as in YCSB.
	fieldBytes = 100
)

// schema is the experiment's record types, for Target.EnsureSchema.
func schema() map[string]string { return map[string]string{"lab_concurrency.proto": rowsProto} }

// appendRow appends a whole Row: its id and ten fields of fieldBytes
// whose contents depend on gen, so that an update changes every field.
func appendRow(b []byte, id int64, gen int) []byte {
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id)) //nolint:gosec // ids are positive
	for f := 0; f < 10; f++ {
		b = appendField(b, protowire.Number(2+f), id, gen, f)
	}
	return b
}

// appendPatchRow appends the id and field f of a Row: what a patch of one
// field of ten sends.
func appendPatchRow(b []byte, id int64, gen, f int) []byte {
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id)) //nolint:gosec // ids are positive
	return appendField(b, protowire.Number(2+f), id, gen, f)
}

func appendField(b []byte, num protowire.Number, id int64, gen, f int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, fieldBytes)
	start := len(b)
	b = fmt.Appendf(b, "%d/%d/%d ", id, gen, f)
	for len(b)-start < fieldBytes {
		b = append(b, 'x')
	}
	return b[:start+fieldBytes]
}

// counterAdd is the Counter record that adds one to counter id.
func counterAdd(id string) *anypb.Any {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, id)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	return &anypb.Any{TypeUrl: counterURL, Value: b}
}
