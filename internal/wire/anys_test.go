package wire_test

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/wire"
)

func anyBytes(url, val string) []byte {
	b := protowire.AppendTag(nil, wire.AnyTypeURL, protowire.BytesType)
	b = protowire.AppendString(b, url)
	b = protowire.AppendTag(b, wire.AnyValue, protowire.BytesType)
	return protowire.AppendString(b, val)
}

func field(num protowire.Number, v []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func varint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// Records gives what proto.Unmarshal gives for the messages of the common
// shape, and refuses every other shape so that the caller falls back.
func TestRecords(t *testing.T) {
	acceptVarint3 := func(num protowire.Number, typ protowire.Type, _ uint64, _ []byte) bool {
		return num == 3 && typ == protowire.VarintType
	}
	for _, tc := range []struct {
		name  string
		b     []byte
		other wire.OtherField
		want  []*anypb.Any // nil with ok false: refused
		ok    bool
	}{
		{"empty", nil, nil, nil, true},
		{"two of one type", cat(field(1, anyBytes("t/a.A", "x")), field(1, anyBytes("t/a.A", "yy"))), nil,
			[]*anypb.Any{{TypeUrl: "t/a.A", Value: []byte("x")}, {TypeUrl: "t/a.A", Value: []byte("yy")}}, true},
		{"two types", cat(field(1, anyBytes("t/a.A", "x")), field(1, anyBytes("t/b.B", ""))), nil,
			[]*anypb.Any{{TypeUrl: "t/a.A", Value: []byte("x")}, {TypeUrl: "t/b.B", Value: []byte{}}}, true},
		{"other field accepted", cat(varint(3, 7), field(1, anyBytes("t/a.A", "x"))), acceptVarint3,
			[]*anypb.Any{{TypeUrl: "t/a.A", Value: []byte("x")}}, true},
		{"other field without a taker", cat(varint(3, 7), field(1, anyBytes("t/a.A", "x"))), nil, nil, false},
		{"unknown field in the Any", field(1, cat(anyBytes("t/a.A", "x"), varint(9, 1))), nil, nil, false},
		{"invalid UTF-8 type URL", field(1, anyBytes("t/\xff", "x")), nil, nil, false},
		{"truncated", field(1, anyBytes("t/a.A", "x"))[:5], nil, nil, false},
		{"fixed32 field", protowire.AppendFixed32(protowire.AppendTag(nil, 2, protowire.Fixed32Type), 1), nil, nil, false},
	} {
		got, ok := wire.DecodeRecords(tc.b, 1, tc.other)
		if ok != tc.ok || len(got) != len(tc.want) {
			t.Fatalf("%s: %d records, ok %v; want %d, %v", tc.name, len(got), ok, len(tc.want), tc.ok)
		}
		for i := range got {
			if !proto.Equal(got[i], tc.want[i]) {
				t.Errorf("%s: record %d is %v, want %v", tc.name, i, got[i], tc.want[i])
			}
		}
	}
}

// A record's value is cut to its length: appending to it never writes
// over the record after it.
func TestRecordsValuesApart(t *testing.T) {
	b := cat(field(1, anyBytes("t/a.A", "x")), field(1, anyBytes("t/a.A", "y")))
	recs, ok := wire.DecodeRecords(b, 1, nil)
	if !ok || len(recs) != 2 {
		t.Fatalf("%v %v", recs, ok)
	}
	_ = append(recs[0].Value, 'z', 'z', 'z', 'z', 'z', 'z', 'z', 'z')
	if string(recs[1].Value) != "y" || recs[1].TypeUrl != "t/a.A" {
		t.Fatalf("the second record became %v", recs[1])
	}
}
