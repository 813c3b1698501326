package wire

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func itemAny(typ string, i int) *anypb.Any {
	return &anypb.Any{TypeUrl: "type.googleapis.com/" + typ, Value: []byte(fmt.Sprintf("\x08%c\x12\x05name%d", i%100, i%10))}
}

// writeSeeds are write requests of every shape, the fast path's and the
// ones it hands to the generated decoder, encoded as both messages (the
// records are field 1 of WriteRequest and field 2 of WriteStreamRequest).
func writeSeeds(t testing.TB) [][]byte {
	recs := []*anypb.Any{itemAny("shop.User", 1), itemAny("shop.User", 2), itemAny("shop.Order", 3), {}, {TypeUrl: "x"}, {Value: []byte{}}}
	var seeds [][]byte
	for _, m := range []proto.Message{
		&pb.WriteRequest{},
		&pb.WriteRequest{Records: recs},
		&pb.WriteStreamRequest{},
		&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_UPSERT, Ack: true},
		&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Records: recs, Ack: true},
		&pb.WriteStreamRequest{Op: pb.WriteOp(-7), Records: recs[:1]},
		&pb.WriteRequest{Records: recs[:2], Conditions: conditionSeeds()},
		&pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_PATCH, Records: recs[:2], Conditions: conditionSeeds(),
			Fields: []string{"name", "address.city"}, Add: []string{"visits"}},
		&pb.WriteStreamRequest{Records: recs[:2], Ops: []pb.WriteOp{pb.WriteOp_WRITE_OP_REMOVE, pb.WriteOp_WRITE_OP_PATCH, pb.WriteOp(-3)}},
	} {
		seeds = append(seeds, marshal(t, m))
	}
	anyOf := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	field := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	for _, a := range [][]byte{
		anyOf(field(2, []byte("v1")), field(1, []byte("u")), field(2, []byte("v2")), field(1, []byte("w"))), // repeats: the last wins
		anyOf(field(1, []byte("u")), field(3, []byte("unknown"))),                                           // unknown field
		anyOf(field(1, []byte("a\xffb"))),                                                                   // invalid UTF-8
		protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 1),                        // wrong wire type
	} {
		seeds = append(seeds, field(1, a), field(2, a))
	}
	// Scalars repeated, unknown fields, a wrong wire type for op.
	seeds = append(seeds,
		[]byte{0x08, 0x01, 0x08, 0x03, 0x18, 0x01, 0x18, 0x00},
		[]byte{0x20, 0x01},
		append([]byte{0x0a, 0x00}, field(2, nil)...),
		field(5, []byte("a\xffb")),                             // a field path of invalid UTF-8
		field(4, []byte{0x20}),                                 // a truncated condition
		append(field(6, nil), 0x30, 0x01),                      // add, then a varint of its number
		[]byte{0x38, 0x02, 0x3a, 0x02, 0x01, 0x04, 0x38, 0x05}, // ops unpacked, packed, unpacked
		[]byte{0x3a, 0x02, 0x01, 0xff},                         // ops packed, truncated
		// Conditions of a record index and a version: repeated (the last
		// wins), an index beyond 32 bits, a version alone, a record index
		// then a key (the oneof's last wins), a truncated version.
		field(4, []byte{0x08, 0x01, 0x20, 0x05, 0x08, 0x02, 0x20, 0x00}),
		field(4, []byte{0x08, 0x80, 0x80, 0x80, 0x80, 0x10}),
		field(4, []byte{0x20, 0x07}),
		field(4, append([]byte{0x08, 0x01}, field(2, nil)...)),
		field(4, []byte{0x08, 0x01, 0x20}),
	)
	return seeds
}

func conditionSeeds() []*pb.Condition {
	v0, v7 := uint64(0), uint64(7)
	return []*pb.Condition{
		{Target: &pb.Condition_Record{Record: 1}, Version: &v7},
		{Target: &pb.Condition_Key{Key: itemAny("shop.User", 4)}, Version: &v0, Filter: `name = "a"`},
		{Target: &pb.Condition_Query{Query: &pb.Query{Type: "shop.User", Limit: 3}}, Count: &v7, MaxVersion: &v0},
		{},
	}
}

// checkDecodeWrite fails unless both fast decoders agree with
// proto.Unmarshal on b.
func checkDecodeWrite(t *testing.T, b []byte) {
	{
		var want, got pb.WriteRequest
		werr := proto.Unmarshal(b, &want)
		gerr := DecodeWriteRequest(b, &got)
		if (werr == nil) != (gerr == nil) || (werr == nil && !proto.Equal(&want, &got)) {
			t.Fatalf("WriteRequest %x: decodeWriteRequest %v (%v), proto.Unmarshal %v (%v)", b, &got, gerr, &want, werr)
		}
	}
	var want, got pb.WriteStreamRequest
	werr := proto.Unmarshal(b, &want)
	gerr := DecodeWriteStreamRequest(b, &got)
	if (werr == nil) != (gerr == nil) || (werr == nil && !proto.Equal(&want, &got)) {
		t.Fatalf("WriteStreamRequest %x: decodeWriteStreamRequest %v (%v), proto.Unmarshal %v (%v)", b, &got, gerr, &want, werr)
	}
}

func TestDecodeWrite(t *testing.T) {
	for _, b := range writeSeeds(t) {
		checkDecodeWrite(t, b)
		// Every truncation, and a byte flipped everywhere.
		for i := range b {
			checkDecodeWrite(t, b[:i])
			c := bytes.Clone(b)
			c[i] ^= 0x80
			checkDecodeWrite(t, c)
		}
	}
}

// batchOfItems is a write batch like the lab's: n records of about 100
// bytes, of one type.
func batchOfItems(n int) *pb.WriteStreamRequest {
	req := &pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Ack: true}
	for i := range n {
		v := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(i))
		v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), fmt.Sprintf("name-%d user%d@example.com lorem ipsum dolor sit amet, consectetur adipiscing", i%1000, i))
		req.Records = append(req.Records, &anypb.Any{TypeUrl: "type.googleapis.com/protobase_lab.Item", Value: v})
	}
	return req
}

func BenchmarkDecodeWrite(b *testing.B) {
	data := marshal(b, batchOfItems(1000))
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for range b.N {
			var r pb.WriteStreamRequest
			if err := DecodeWriteStreamRequest(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for range b.N {
			var r pb.WriteStreamRequest
			if err := proto.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
