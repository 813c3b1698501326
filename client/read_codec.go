package client

import (
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/anywire"
	"github.com/protobase/protobase/internal/apiwire"
)

// The read codec decodes the responses that carry records by the million,
// ScanResponse and QueryResponse here, SearchResponse in search_codec.go. The generated decoder allocates three
// times per record (the Any, its type URL, a copy of its value): a full
// Scan of 1,000,000 records made 3,000,000 allocations, and decoding was
// about a quarter of the Scan's CPU. The codec copies the response's
// bytes once and decodes its records with internal/anywire, which points
// every record's value into that copy: four allocations per response,
// whatever its size. The cost is that a record kept by the caller keeps the bytes of
// its whole response (one batch or page) alive.
//
// It only takes the common shape (known fields with their wire types, no
// plan, Anys holding only type_url and value) and hands anything else to
// proto.Unmarshal, so that its result is always what proto.Unmarshal
// produces (FuzzDecodeRead checks it): same messages, same
// errors.

var protoCodec = encoding.GetCodecV2("proto")

// readCodec is the codec of the Scan, Query and Search calls: protobuf, with the
// fast decoder above for their responses. Its name is "proto", so the
// server sees ordinary protobuf.
type readCodec struct{}

// readCall makes a call use readCodec.
var readCall = grpc.ForceCodecV2(readCodec{})

// Name implements encoding.CodecV2.
func (readCodec) Name() string { return "proto" }

// Marshal implements encoding.CodecV2.
func (readCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

// Unmarshal implements encoding.CodecV2.
func (readCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *pb.ScanResponse:
		return decodeScanResponse(data.Materialize(), m)
	case *pb.QueryResponse:
		return decodeQueryResponse(data.Materialize(), m)
	case *pb.SearchResponse:
		return decodeSearchResponse(data.Materialize(), m)
	}
	return protoCodec.Unmarshal(data, v)
}

// decodeScanResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy.
func decodeScanResponse(b []byte, m *pb.ScanResponse) error {
	var count uint64
	var done bool
	recs, ok := anywire.Records(b, apiwire.ScanResponseRecords, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) bool {
		switch {
		case num == apiwire.ScanResponseCount && typ == protowire.VarintType:
			count = v
		case num == apiwire.ScanResponseDone && typ == protowire.VarintType:
			done = v != 0
		default:
			return false
		}
		return true
	})
	if !ok {
		return proto.Unmarshal(b, m)
	}
	m.Reset()
	m.Records, m.Count, m.Done = recs, count, done
	return nil
}

// decodeQueryResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy.
func decodeQueryResponse(b []byte, m *pb.QueryResponse) error {
	var count uint64
	var token []byte
	recs, ok := anywire.Records(b, apiwire.QueryResponseRecords, func(num protowire.Number, typ protowire.Type, v uint64, s []byte) bool {
		switch {
		case num == apiwire.QueryResponseCount && typ == protowire.VarintType:
			count = v
		case num == apiwire.QueryResponseNextPageToken && typ == protowire.BytesType && utf8.Valid(s):
			token = s
		default:
			return false
		}
		return true
	})
	if !ok {
		return proto.Unmarshal(b, m)
	}
	m.Reset()
	m.Records, m.Count, m.NextPageToken = recs, count, string(token)
	return nil
}
