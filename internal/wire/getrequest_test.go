package wire

import (
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The GetRequest decoder against proto.Unmarshal on the keys clients send
// and on shapes it leaves to proto.Unmarshal.
func TestDecodeGetRequest(t *testing.T) {
	num := structpb.NewNumberValue
	str := structpb.NewStringValue
	msgs := []proto.Message{
		&pb.GetRequest{},
		&pb.GetRequest{Type: "bench.Item", Keys: []*structpb.Value{num(123456)}},
		&pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{num(0), num(-1), num(math.MaxFloat64), num(math.Inf(-1)), num(math.NaN())}, Versions: true},
		&pb.GetRequest{Type: "t", Keys: []*structpb.Value{str(""), str("ann"), str("9007199254740993"), structpb.NewBoolValue(true), structpb.NewBoolValue(false), num(7)}},
		// Left to proto.Unmarshal.
		&pb.GetRequest{Type: "t", Keys: []*structpb.Value{structpb.NewNullValue()}},
		&pb.GetRequest{Type: "t", Keys: []*structpb.Value{structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{num(1), str("a")}})}},
		&pb.GetRequest{Type: "t", Keys: []*structpb.Value{{}}},
		&pb.GetRequest{Type: "t", KeyRecords: []*anypb.Any{{TypeUrl: "type.googleapis.com/t", Value: []byte{8, 1}}}},
	}
	var inputs [][]byte
	for _, m := range msgs {
		inputs = append(inputs, marshal(t, m))
	}
	field := func(num protowire.Number, typ protowire.Type, v []byte) []byte {
		return append(protowire.AppendTag(nil, num, typ), v...)
	}
	key := func(v []byte) []byte {
		return field(GetRequestKeys, protowire.BytesType, protowire.AppendBytes(nil, v))
	}
	numKey := field(JSONNumber, protowire.Fixed64Type, protowire.AppendFixed64(nil, math.Float64bits(3)))
	strKey := field(JSONString, protowire.BytesType, protowire.AppendString(nil, "k"))
	typeField := field(GetRequestType, protowire.BytesType, protowire.AppendString(nil, "t"))
	inputs = append(inputs,
		append(key(numKey), typeField...),                            // keys before the type
		append(typeField, typeField...),                              // the type twice
		key(append(numKey, strKey...)),                               // a key of two kinds: the last wins
		key(field(JSONString, protowire.BytesType, []byte{1, 0xff})), // a string key of invalid UTF-8
		key(field(JSONNumber, protowire.VarintType, []byte{3})),      // a number in another wire type
		key(field(JSONBool, protowire.VarintType, []byte{0x80, 0x01})),
		field(GetRequestVersions, protowire.VarintType, []byte{2}),
		append(key(strKey), 0x08), // truncated
	)
	for _, b := range inputs {
		checkDecodeHand(t, b, func() proto.Message { return new(pb.GetRequest) })
	}
}

// BenchmarkDecodeGetRequest decodes a unary Get of one key, the request
// an application reading one record at a time sends.
func BenchmarkDecodeGetRequest(b *testing.B) {
	data := marshal(b, &pb.GetRequest{Type: "bench.Item", Keys: []*structpb.Value{structpb.NewNumberValue(123456)}})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var r pb.GetRequest
			if err := DecodeGetRequest(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var r pb.GetRequest
			if err := proto.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
