package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The read decoders decode the responses that carry records by the
// million: ScanResponse and QueryResponse here, SearchResponse in
// searchresponse.go; and GetResponse, the answer of unary reads by key. The generated decoder allocates three times per
// record (the Any, its type URL, a copy of its value): a full Scan of
// 1,000,000 records made 3,000,000 allocations, and decoding was about a
// quarter of the Scan's CPU. These decode the records with DecodeRecords, which
// points every record's value into the response's bytes: a few
// allocations per response, whatever its size. The cost is that a record
// kept by the caller keeps the bytes of its whole response (one batch or
// page) alive.
//
// They only take the common shape (known fields with their wire types,
// no plan, Anys holding only type_url and value) and hand anything else
// to proto.Unmarshal, so that their result is always what proto.Unmarshal
// produces (FuzzDecodeScanResponse and FuzzDecodeQueryResponse check it): same messages, same errors.

// DecodeScanResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy.
func DecodeScanResponse(b []byte, m *pb.ScanResponse) error {
	var count uint64
	var done bool
	var versions []uint64
	recs, ok := DecodeRecords(b, ScanResponseRecords, func(num protowire.Number, typ protowire.Type, v uint64, s []byte) bool {
		ok := true
		switch {
		case num == ScanResponseCount && typ == protowire.VarintType:
			count = v
		case num == ScanResponseDone && typ == protowire.VarintType:
			done = v != 0
		case num == ScanResponseVersions && typ == protowire.BytesType:
			versions, ok = readPacked(versions, s)
		default:
			return false
		}
		return ok
	})
	if !ok {
		return proto.Unmarshal(b, m)
	}
	m.Reset()
	m.Records, m.Count, m.Done, m.Versions = recs, count, done, versions
	return nil
}

// DecodeQueryResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy.
func DecodeQueryResponse(b []byte, m *pb.QueryResponse) error {
	var count uint64
	var token []byte
	var versions []uint64
	recs, ok := DecodeRecords(b, QueryResponseRecords, func(num protowire.Number, typ protowire.Type, v uint64, s []byte) bool {
		ok := true
		switch {
		case num == QueryResponseCount && typ == protowire.VarintType:
			count = v
		case num == QueryResponseNextPageToken && typ == protowire.BytesType && utf8.Valid(s):
			token = s
		case num == QueryResponseVersions && typ == protowire.BytesType:
			versions, ok = readPacked(versions, s)
		default:
			return false
		}
		return ok
	})
	if !ok {
		return proto.Unmarshal(b, m)
	}
	m.Reset()
	m.Records, m.Count, m.NextPageToken, m.Versions = recs, count, string(token), versions
	return nil
}

// DecodeGetResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy. The keys of missing
// records (given back as the request gave them) are left to
// proto.Unmarshal.
func DecodeGetResponse(b []byte, m *pb.GetResponse) error {
	var missing, unanswered []uint32
	var versions []uint64
	recs, ok := DecodeRecords(b, GetResponseRecords, func(num protowire.Number, typ protowire.Type, _ uint64, s []byte) bool {
		if typ != protowire.BytesType {
			return false
		}
		ok := false
		switch num {
		case GetResponseMissing:
			missing, ok = readPacked(missing, s)
		case GetResponseUnanswered:
			unanswered, ok = readPacked(unanswered, s)
		case GetResponseVersions:
			versions, ok = readPacked(versions, s)
		}
		return ok
	})
	if !ok {
		return proto.Unmarshal(b, m)
	}
	m.Reset()
	m.Records, m.Missing, m.Unanswered, m.Versions = recs, missing, unanswered, versions
	return nil
}
