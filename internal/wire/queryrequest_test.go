package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// BenchmarkDecodeQueryRequest decodes a unary Query by primary key, the
// request an application reading one record at a time sends.
func BenchmarkDecodeQueryRequest(b *testing.B) {
	data := marshal(b, &pb.QueryRequest{Query: cmpQuery("bench.Item", "id", pb.Op_OP_EQ, &pb.Value{Kind: &pb.Value_Int{Int: 123456}})})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var r pb.QueryRequest
			if err := DecodeQueryRequest(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var r pb.QueryRequest
			if err := proto.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
