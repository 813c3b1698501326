package grpc

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/wire"
)

// TestCodecDecodesWritesApart checks what the write decoder is for: few
// allocations per request whatever its records, one type URL string per
// type, and records that hold nothing of the transport's buffer and cannot
// overwrite each other.
func TestCodecDecodesWritesApart(t *testing.T) {
	req := batchOfItems(1000)
	data := marshal(t, req)
	buf := bytes.Clone(data)
	var got pb.WriteStreamRequest
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(buf)}, &got); err != nil {
		t.Fatal(err)
	}
	clear(buf) // gRPC reuses its buffers
	if !proto.Equal(req, &got) {
		t.Fatal("decoded request differs from the one sent")
	}
	a, b := got.Records[0], got.Records[1]
	if unsafe.StringData(a.TypeUrl) != unsafe.StringData(b.TypeUrl) {
		t.Fatal("records of one type do not share the type URL string")
	}
	before := bytes.Clone(b.Value)
	_ = append(a.Value, 0xff, 0xff, 0xff) //nolint:gocritic // the append is the test
	if !bytes.Equal(b.Value, before) {
		t.Fatal("appending to a record's value overwrote the next record")
	}
	allocs := testing.AllocsPerRun(100, func() {
		var r pb.WriteStreamRequest
		if err := wire.DecodeWriteStreamRequest(data, &r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 { // the generated decoder makes > 3000
		t.Fatalf("%v allocations decoding a batch of 1000 records", allocs)
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

func BenchmarkMarshalSearch(b *testing.B) {
	m := &pb.SearchResponse{}
	for i := range 1000 {
		m.Results = append(m.Results, &pb.ResultBatch{Query: uint64(i), Records: []*anypb.Any{{TypeUrl: "type.googleapis.com/bench.Item", Value: make([]byte, 100)}}})
		m.Done = append(m.Done, &pb.QueryDone{Query: uint64(i), Count: 1})
	}
	for _, mode := range []string{"generated", "hand"} {
		b.Run(fmt.Sprintf("lookups=1000/%s", mode), func(b *testing.B) {
			for b.Loop() {
				if mode == "generated" {
					out, _ := protoCodec.Marshal(m)
					out.Free()
				} else {
					out, _ := Codec{}.Marshal(m)
					out.Free()
				}
			}
		})
	}
}

// BenchmarkMarshalOneRecord encodes the answers of a one-key Get and Query.
func BenchmarkMarshalOneRecord(b *testing.B) {
	rec := []*anypb.Any{{TypeUrl: "type.googleapis.com/bench.Item", Value: make([]byte, 100)}}
	for _, m := range []proto.Message{&pb.GetResponse{Records: rec}, &pb.QueryResponse{Records: rec}} {
		for _, mode := range []string{"generated", "hand"} {
			b.Run(fmt.Sprintf("%s/%s", m.ProtoReflect().Descriptor().Name(), mode), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var out mem.BufferSlice
					if mode == "generated" {
						out, _ = protoCodec.Marshal(m)
					} else {
						out, _ = Codec{}.Marshal(m)
					}
					out.Free()
				}
			})
		}
	}
}
