package wire

import (
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The Go client sends a Search request of one lookup per round trip when
// an application reads one record at a time; proto.Marshal sized and
// wrote its nested messages (query, expression, comparison, value) by
// reflection at a few hundred nanoseconds a query. SizeSearchRequest and
// AppendSearchRequest write each query as the QueryRequest encoder does
// (requestencode.go), as proto.Marshal writes them (TestEncodeSearchRequest),
// and decline a request with any query of another shape, which
// proto.Marshal then writes or refuses.

// SizeSearchRequest returns the encoded size of m, and false when m is not
// of the shape AppendSearchRequest writes.
func SizeSearchRequest(m *pb.SearchRequest) (int, bool) {
	if len(m.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n := 0
	for _, q := range m.Queries {
		var s QuerySizes
		if q == nil || !sizeQuery(q, &s) {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(s.query)
	}
	return n, true
}

// AppendSearchRequest appends m, which SizeSearchRequest accepted, as
// proto.Marshal encodes it.
func AppendSearchRequest(b []byte, m *pb.SearchRequest) []byte {
	for _, q := range m.Queries {
		var s QuerySizes
		sizeQuery(q, &s)
		b = protowire.AppendTag(b, SearchRequestQueries, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(s.query)) //nolint:gosec // a size
		b = appendQuery(b, q, s)
	}
	return b
}
