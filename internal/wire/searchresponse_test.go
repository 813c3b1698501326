package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The answer to one primary-key lookup, a record and its completion, is
// decoded as proto.Unmarshal decodes it in two allocations: its parts in
// one, the record's type URL in the other (the record's bytes are the
// input's).
func TestDecodeOneRecordResponse(t *testing.T) {
	want := oneRecordAnswer()
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got pb.SearchResponse
	if err := DecodeSearchResponse(b, &got); err != nil || !proto.Equal(&got, want) {
		t.Fatalf("decoded %v, %v; want %v", &got, err, want)
	}
	// Appending to a list moves it out: the next part is not written over.
	got.Results[0].Records = append(got.Results[0].Records, &anypb.Any{})
	got.Results = append(got.Results, &pb.ResultBatch{Query: 8})
	if got.Done[0].Query != 7 || got.Results[0].Query != 7 {
		t.Fatalf("an append wrote over the response: %v", &got)
	}
	var m pb.SearchResponse
	allocs := testing.AllocsPerRun(100, func() {
		if err := DecodeSearchResponse(b, &m); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Fatalf("%v allocations to decode one record's answer, want 2", allocs)
	}
}

// oneRecordAnswer is the answer to one primary-key lookup.
func oneRecordAnswer() *pb.SearchResponse {
	return &pb.SearchResponse{
		Results: []*pb.ResultBatch{{Query: 7, Records: []*anypb.Any{{TypeUrl: "type.googleapis.com/shop.User", Value: []byte("\x08\x07\x12\x02n7")}}}},
		Done:    []*pb.QueryDone{{Query: 7, Count: 1}},
	}
}

// BenchmarkDecodeOneRecordResponse decodes the answer to one primary-key
// lookup, as the Go client's Search does at every such round trip.
func BenchmarkDecodeOneRecordResponse(b *testing.B) {
	data := marshal(b, oneRecordAnswer())
	b.ReportAllocs()
	var m pb.SearchResponse
	for b.Loop() {
		if err := DecodeSearchResponse(data, &m); err != nil {
			b.Fatal(err)
		}
	}
}
