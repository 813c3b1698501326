package grpc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func randomRecords(r *rand.Rand) []*anypb.Any {
	var recs []*anypb.Any
	for range r.IntN(4) {
		a := &anypb.Any{Value: make([]byte, r.IntN(300))}
		if r.IntN(5) > 0 {
			a.TypeUrl = "type.googleapis.com/shop.User"
		}
		recs = append(recs, a)
	}
	return recs
}

func randomValue(r *rand.Rand) uint64 {
	switch r.IntN(3) {
	case 0:
		return 0
	case 1:
		return uint64(r.IntN(200))
	}
	return r.Uint64()
}

// The hand encoders write exactly what the generated code writes, for
// the shapes they cover and (by handing over) for the others.
func TestEncodeMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var msgs []proto.Message
	for range 500 {
		m := &pb.SearchResponse{}
		for range r.IntN(4) {
			m.Results = append(m.Results, &pb.ResultBatch{Query: randomValue(r), Records: randomRecords(r)})
		}
		for range r.IntN(4) {
			m.Done = append(m.Done, &pb.QueryDone{Query: randomValue(r), Count: randomValue(r)})
		}
		msgs = append(msgs, m)
		msgs = append(msgs, &pb.ScanResponse{Records: randomRecords(r), Count: randomValue(r), Done: r.IntN(2) == 0})
	}
	// Shapes left to the generated code.
	msgs = append(msgs,
		&pb.SearchResponse{Errors: []*pb.QueryError{{Query: 3, Code: 5, Message: "no"}}},
		&pb.SearchResponse{Done: []*pb.QueryDone{{Query: 1, Plan: &pb.Plan{}}}},
		&pb.SearchResponse{Results: []*pb.ResultBatch{{Query: 1, Plan: &pb.Plan{}}}},
		&pb.ScanResponse{Plan: &pb.Plan{}, Done: true},
		&pb.ScanResponse{Records: []*anypb.Any{{TypeUrl: "bad\xff"}}},
	)
	for i, m := range msgs {
		want, wantErr := proto.Marshal(m)
		got, err := Codec{}.Marshal(m)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("message %d: error %v, generated code's %v", i, err, wantErr)
		}
		if err != nil {
			continue
		}
		if b := got.Materialize(); !bytes.Equal(b, want) {
			t.Fatalf("message %d (%v):\n got %x\nwant %x", i, m, b, want)
		}
		got.Free()
	}
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
