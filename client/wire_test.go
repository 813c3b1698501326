package client

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The decoders' tests build their inputs with these: messages encoded by
// the generated code, and fields written by hand in shapes it never
// writes.

// marshalAll encodes msgs.
func marshalAll[M proto.Message](t testing.TB, msgs []M) [][]byte {
	t.Helper()
	out := make([][]byte, 0, len(msgs))
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// field appends field num holding bytes v.
func field(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// varint appends field num holding varint v.
func varint(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}
