package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// marshalHand encodes m with its hand encoder, in a buffer of exactly the
// size its Size function gives (a larger one would hide a size too small);
// ok is false when the encoder leaves m to the generated code, or m has no
// hand encoder.
func marshalHand(m proto.Message) (b []byte, ok bool) {
	var n int
	switch m := m.(type) {
	case *pb.SearchResponse:
		if n, ok = SizeSearchResponse(m); ok {
			b = AppendSearchResponse(make([]byte, 0, n), m)
		}
	case *pb.ScanResponse:
		if n, ok = SizeScanResponse(m); ok {
			b = AppendScanResponse(make([]byte, 0, n), m)
		}
	case *pb.QueryRequest:
		var s QuerySizes
		if s, ok = SizeQueryRequest(m); ok {
			n = s.request
			b = AppendQueryRequest(make([]byte, 0, n), m, s)
		}
	case *pb.GetRequest:
		if n, ok = SizeGetRequest(m); ok {
			b = AppendGetRequest(make([]byte, 0, n), m)
		}
	case *pb.GetResponse:
		if n, ok = SizeGetResponse(m); ok {
			b = AppendGetResponse(make([]byte, 0, n), m)
		}
	case *pb.QueryResponse:
		if n, ok = SizeQueryResponse(m); ok {
			b = AppendQueryResponse(make([]byte, 0, n), m)
		}
	}
	if ok && (len(b) != n || cap(b) != n) {
		panic("hand encoder's size differs from what it wrote")
	}
	return b, ok
}
