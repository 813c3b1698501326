package wire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func cmpQuery(typ, field string, op pb.Op, v *pb.Value) *pb.Query {
	return &pb.Query{Type: typ, Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: field, Op: op, Value: v}}}}
}

func intValue(x int64) *pb.Value { return &pb.Value{Kind: &pb.Value_Int{Int: x}} }

// querySeeds are Query messages in the common shape and out of it.
func querySeeds() []*pb.Query {
	flags := cmpQuery("shop.User", "id", pb.Op_OP_EQ, intValue(7))
	flags.Limit, flags.KeysOnly, flags.Explain, flags.Count = 3, true, true, true
	order := cmpQuery("shop.User", "id", pb.Op_OP_EQ, intValue(7))
	order.Order = &pb.Order{Descending: true}
	values := cmpQuery("shop.User", "id", pb.Op_OP_IN, nil)
	values.Where.GetCmp().Values = []*pb.Value{intValue(1), intValue(2)}
	and := &pb.Query{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{}}}}
	return []*pb.Query{
		{}, {Type: "shop.User"}, {Type: "shop.User", Limit: 10},
		cmpQuery("shop.User", "id", pb.Op_OP_EQ, intValue(1)),
		cmpQuery("shop.User", "id", pb.Op_OP_EQ, intValue(-1)),
		cmpQuery("shop.User", "id", pb.Op_OP_EQ, intValue(1<<62)),
		cmpQuery("shop.User", "age", pb.Op_OP_GT, &pb.Value{Kind: &pb.Value_Uint{Uint: 300}}),
		cmpQuery("t", "b", pb.Op_OP_NE, &pb.Value{Kind: &pb.Value_Bool{Bool: true}}),
		cmpQuery("t", "s", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_String_{String_: "a\x00é"}}),
		cmpQuery("t", "y", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Bytes{Bytes: []byte{}}}),
		cmpQuery("t", "", pb.Op_OP_EQ, nil),
		cmpQuery("", "id", 0, intValue(0)),
		flags, order, values, and,
	}
}

// Each case's bytes are read or refused as the comment says.
func TestReadQuery(t *testing.T) {
	plain := func(q *pb.Query) []byte {
		b, err := proto.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	lookup := plain(cmpQuery("shop.User", "id", pb.Op_OP_EQ, intValue(300)))
	twice := append(append([]byte(nil), lookup...), lookup[:2+lookup[1]]...) // the type again
	cases := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"a lookup", lookup, true},
		{"empty", nil, true},
		{"a field twice", twice, false},
		{"cut short", lookup[:len(lookup)-1], false},
		{"invalid UTF-8 type", protowire.AppendString(protowire.AppendTag(nil, QueryType, protowire.BytesType), "\xff"), false},
		{"type as a varint", protowire.AppendVarint(protowire.AppendTag(nil, QueryType, protowire.VarintType), 1), false},
		{"unknown field", protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1), false},
		{"order", plain(&pb.Query{Order: &pb.Order{}}), false},
		{"a list of values", plain(querySeeds()[len(querySeeds())-2]), false},
		{"and", plain(querySeeds()[len(querySeeds())-1]), false},
		{"limit", plain(&pb.Query{Type: "t", Limit: 5}), true},
	}
	for _, tc := range cases {
		var q Query
		if got := ReadQuery(tc.b, &q); got != tc.ok {
			t.Errorf("%s: ReadQuery = %v, want %v", tc.name, got, tc.ok)
		}
	}
	var q Query
	if !ReadQuery(lookup, &q) {
		t.Fatal("lookup refused")
	}
	if string(q.Type) != "shop.User" || string(q.Cmp.Field) != "id" || q.Cmp.Op != int32(pb.Op_OP_EQ) ||
		!q.Where || !q.Cmp.HasValue || q.Cmp.Value.Num != ValueInt || q.Cmp.Value.X != 300 {
		t.Fatalf("read %+v", q)
	}
	// The operand's position: the Value's content, 3 bytes (tag, 2-byte
	// varint), ends the comparison and the query.
	ve := len(lookup) - q.AfterWhere - q.AfterValue
	if q.ValueLen != 3 || !bytes.Equal(lookup[ve-q.ValueLen:ve], []byte{0x08, 0xac, 0x02}) {
		t.Fatalf("operand at %d..%d of % x", ve-q.ValueLen, ve, lookup)
	}
}

// What ReadQuery takes, proto.Unmarshal decodes without error into the
// same query.
func FuzzReadQuery(f *testing.F) {
	for _, q := range querySeeds() {
		b, err := proto.Marshal(q)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var q Query
		if !ReadQuery(b, &q) {
			return
		}
		var want pb.Query
		if err := proto.Unmarshal(b, &want); err != nil {
			t.Fatalf("read bytes proto.Unmarshal refuses: %v", err)
		}
		if got := fromWire(&q); !proto.Equal(got, &want) {
			t.Fatalf("read %v, proto.Unmarshal %v", got, &want)
		}
	})
}

// fromWire is the query q was read from.
func fromWire(q *Query) *pb.Query {
	out := &pb.Query{Type: string(q.Type), Limit: q.Limit, KeysOnly: q.KeysOnly, Explain: q.Explain, Count: q.Count, Versions: q.Versions}
	if !q.Where {
		return out
	}
	c := &pb.Comparison{Field: string(q.Cmp.Field), Op: pb.Op(q.Cmp.Op)}
	if q.Cmp.HasValue {
		v, x := &q.Cmp.Value, q.Cmp.Value.X
		switch v.Num {
		case ValueInt:
			c.Value = intValue(int64(x)) //nolint:gosec // two's complement, as on the wire
		case ValueUint:
			c.Value = &pb.Value{Kind: &pb.Value_Uint{Uint: x}}
		case ValueBool:
			c.Value = &pb.Value{Kind: &pb.Value_Bool{Bool: x != 0}}
		case ValueString:
			c.Value = &pb.Value{Kind: &pb.Value_String_{String_: string(v.S)}}
		case ValueBytes:
			c.Value = &pb.Value{Kind: &pb.Value_Bytes{Bytes: append([]byte{}, v.S...)}}
		}
	}
	out.Where = &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: c}}
	return out
}
