package engine_test

import (
	"fmt"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// bytesSource is an engine.WireSource handing out one request's bytes,
// marshalled beforehand, then io.EOF.
type bytesSource struct {
	b    []byte
	sent bool
}

func (s *bytesSource) Recv() (*pb.SearchRequest, error) {
	b, err := s.RecvWire()
	if err != nil {
		return nil, err
	}
	var req pb.SearchRequest
	return &req, proto.Unmarshal(b, &req)
}

func (s *bytesSource) RecvWire() ([]byte, error) {
	if s.sent {
		return nil, io.EOF
	}
	s.sent = true
	return s.b, nil
}

func (s *bytesSource) DecodeWire() (*pb.SearchRequest, error) {
	var req pb.SearchRequest
	return &req, proto.Unmarshal(s.b, &req)
}

func (s *bytesSource) MaxQueries() int { return 0 }

// BenchmarkSearchWire runs, on a stream of its own each time, a request of
// 1,000 primary-key lookups (with their condition as a tree, and as the
// text "id == N") and a lone query reading 1,000 records, answered as wire
// bytes: what the engine's response writers cost a record, with the
// record cache warm.
func BenchmarkSearchWire(b *testing.B) {
	te := benchUsers(b, 10000)
	const n = 1000
	var lookups, textLookups []*pb.Query
	for i := range n {
		lookups = append(lookups, lookup(1+i*10))
		textLookups = append(textLookups, &pb.Query{Type: "shop.User", Filter: fmt.Sprintf("id == %d", 1+i*10)})
	}
	for _, c := range []struct {
		name string
		qs   []*pb.Query
	}{
		{"lookups", lookups},
		{"lookups-text", textLookups},
		{"range", []*pb.Query{{Type: "shop.User", Limit: n}}},
	} {
		req, err := proto.Marshal(&pb.SearchRequest{Queries: c.qs})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			sent := 0
			sink := encodingWireSink{wireSink{
				func(*pb.SearchResponse) error { b.Fatal("a response went out as a message"); return nil },
				func(resp []byte) error { sent += len(resp); return nil },
			}}
			b.ReportAllocs()
			for range b.N {
				if err := te.E.SearchStream(b.Context(), &bytesSource{b: req}, sink); err != nil {
					b.Fatal(err)
				}
			}
			if sent == 0 {
				b.Fatal("nothing sent")
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
