package engine

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/protobase/protobase/internal/query"
)

const absentProto = `syntax = "proto3";
package ab;
import "protobase/v1/options.proto";
message Inner { string phone = 1; optional int32 ext = 2; }
message Outer { Inner inner = 1; }
message Rec {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true }
    index: { fields: "handle" unique: true }
    index: { fields: "inner.phone" unique: true }
    index: { fields: "inner.ext" unique: true }
    index: { fields: "outer.inner.phone" unique: true }
    index: { fields: "username" unique: true }
    index: { fields: "via.phone" unique: true }
    index: { fields: ["handle", "email"] unique: true }
  };
  int64 id = 1;
  optional string email = 2;
  string handle = 3;
  Inner inner = 4;
  Outer outer = 5;
  oneof login { string username = 6; int64 badge = 7; Inner via = 8; }
}
`

// randomInner encodes an Inner with some of its fields, possibly repeated.
func randomInner(r *rand.Rand) []byte {
	var b []byte
	for range r.IntN(3) {
		if r.IntN(2) == 0 {
			b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), []string{"", "p"}[r.IntN(2)])
		} else {
			b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(r.IntN(2)))
		}
	}
	return b
}

// randomAbsentRec encodes a Rec from random field occurrences: repeats
// merge, and a later oneof member clears an earlier one.
func randomAbsentRec(r *rand.Rand) []byte {
	b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)
	msg := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	for range r.IntN(7) {
		switch n := protowire.Number(2 + r.IntN(7)); n {
		case 2, 3, 6:
			b = protowire.AppendString(protowire.AppendTag(b, n, protowire.BytesType), []string{"", "v"}[r.IntN(2)])
		case 4, 8:
			b = msg(b, n, randomInner(r))
		case 5:
			var o []byte
			for range r.IntN(3) {
				o = msg(o, 1, randomInner(r))
			}
			b = msg(b, n, o)
		case 7:
			b = protowire.AppendVarint(protowire.AppendTag(b, n, protowire.VarintType), uint64(r.IntN(2)))
		}
	}
	return b
}

// TestAbsentMatchesDecoder checks the rule's reading of presence against
// a full decode: a key field is absent when a field with presence on its
// path is not set in the decoded message.
func TestAbsentMatchesDecoder(t *testing.T) {
	rt := openCatalog(t, absentProto, "ab.Rec")
	r := rand.New(rand.NewPCG(5, 6))
	var occ []occurrence
	for range 5000 {
		rec := randomAbsentRec(r)
		m := dynamicpb.NewMessage(rt.rt.Desc)
		if err := proto.Unmarshal(rec, m); err != nil {
			t.Fatalf("generated an invalid record % x: %v", rec, err)
		}
		occ = rt.keys.locate(rec, occ[:0])
		for j, ix := range rt.indexes {
			want := false
			for _, kf := range ix.ix.Fields {
				if query.CanBeAbsent(kf) && !setAlong(m, kf.Fields) {
					want = true
				}
			}
			for _, o := range [][]occurrence{occ, nil} {
				got, err := rt.keys.absent(rec, o, j)
				if err != nil || got != want {
					t.Fatalf("record % x index %s: absent %v %v, want %v", rec, ix.ix.Name, got, err, want)
				}
			}
		}
	}
}

// setAlong reports whether every field with presence along path is set.
func setAlong(m protoreflect.Message, path []protoreflect.FieldDescriptor) bool {
	for i, fd := range path {
		if fd.HasPresence() && !m.Has(fd) {
			return false
		}
		if i < len(path)-1 {
			m = m.Get(fd).Message()
		}
	}
	return true
}
