package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The server sends two messages by the million: SearchResponse (a batch
// of lookups answers 1,000 queries in one) and ScanResponse; and the
// answers of unary one-key reads, GetResponse and QueryResponse, by the
// ten thousand a second. The generated marshaller walks them by
// reflection-driven tables and grpc-go places the result in its default
// buffer pool, which zeroes every buffer; together that was a fifth of the
// server's CPU on batched lookups. These encoders write the same bytes
// (TestEncodeMatchesProto) into a buffer the caller sizes exactly
// beforehand (SizeSearchResponse, SizeScanResponse, SizeGetResponse,
// SizeQueryResponse).
// They cover the shapes the engine builds; a message with anything else
// (an explain plan, an error, unknown fields at the top) is refused by its
// Size function and goes to the generated code. Nested messages are the
// engine's own and never carry unknown fields, so they are not asked
// (asking was a tenth of the encoding).

func sizeVarintField(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

func sizeBytesField(n int) int {
	if n == 0 {
		return 0
	}
	return 1 + protowire.SizeBytes(n)
}

// sizeAny is the encoded size of a (not nil).
func sizeAny(a *anypb.Any) (int, bool) {
	if a == nil {
		return 0, false
	}
	return sizeBytesField(len(a.TypeUrl)) + sizeBytesField(len(a.Value)), true
}

func sizeRecords(recs []*anypb.Any) (int, bool) {
	n := 0
	valid := "" // a type URL known to be UTF-8: records of a batch share one
	for _, a := range recs {
		s, ok := sizeAny(a)
		if !ok {
			return 0, false
		}
		// The generated code refuses a string field that is not UTF-8;
		// so does this encoder, by leaving the message to it.
		if a.TypeUrl != valid {
			if !utf8.ValidString(a.TypeUrl) {
				return 0, false
			}
			valid = a.TypeUrl
		}
		n += 1 + protowire.SizeBytes(s)
	}
	return n, true
}

func sizeBatch(b *pb.ResultBatch) (int, bool) {
	if b == nil || b.Plan != nil {
		return 0, false
	}
	n, ok := sizeRecords(b.Records)
	return n + sizeVarintField(b.Query) + sizePacked(b.Versions), ok
}

func sizeDone(d *pb.QueryDone) (int, bool) {
	if d == nil || d.Plan != nil {
		return 0, false
	}
	return sizeVarintField(d.Query) + sizeVarintField(d.Count), true
}

// SizeSearchResponse is the encoded size of m; ok is false when m has a
// shape AppendSearchResponse does not cover.
func SizeSearchResponse(m *pb.SearchResponse) (size int, ok bool) {
	if len(m.Errors) > 0 || len(m.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n := 0
	for _, b := range m.Results {
		s, ok := sizeBatch(b)
		if !ok {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(s)
	}
	for _, d := range m.Done {
		s, ok := sizeDone(d)
		if !ok {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(s)
	}
	return n, true
}

// SizeScanResponse is the encoded size of m; ok is false when m has a
// shape AppendScanResponse does not cover.
func SizeScanResponse(m *pb.ScanResponse) (size int, ok bool) {
	if m.Plan != nil || len(m.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n, ok := sizeRecords(m.Records)
	n += sizeVarintField(m.Count)
	if m.Done {
		n += 2
	}
	return n + sizePacked(m.Versions), ok
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendStringField(b []byte, num protowire.Number, v string) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// appendRecords appends recs as field num; sizeRecords accepted them.
func appendRecords(b []byte, num protowire.Number, recs []*anypb.Any) []byte {
	for _, a := range recs {
		s, _ := sizeAny(a)
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(s))
		b = appendStringField(b, AnyTypeURL, a.TypeUrl)
		b = appendBytesField(b, AnyValue, a.Value)
	}
	return b
}

// AppendSearchResponse appends m, which SizeSearchResponse accepted.
func AppendSearchResponse(b []byte, m *pb.SearchResponse) []byte {
	for _, rb := range m.Results {
		s, _ := sizeBatch(rb)
		b = protowire.AppendTag(b, SearchResponseResults, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(s))
		b = appendVarintField(b, ResultBatchQuery, rb.Query)
		b = appendRecords(b, ResultBatchRecords, rb.Records)
		b = appendPacked(b, ResultBatchVersions, rb.Versions)
	}
	for _, d := range m.Done {
		s, _ := sizeDone(d)
		b = protowire.AppendTag(b, SearchResponseDone, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(s))
		b = appendVarintField(b, QueryDoneQuery, d.Query)
		b = appendVarintField(b, QueryDoneCount, d.Count)
	}
	return b
}

// AppendScanResponse appends m, which SizeScanResponse accepted.
func AppendScanResponse(b []byte, m *pb.ScanResponse) []byte {
	b = appendRecords(b, ScanResponseRecords, m.Records)
	b = appendVarintField(b, ScanResponseCount, m.Count)
	if m.Done {
		b = protowire.AppendTag(b, ScanResponseDone, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return appendPacked(b, ScanResponseVersions, m.Versions)
}

// SizeGetResponse is the encoded size of m; ok is false when m has a
// shape AppendGetResponse does not cover (the keys of missing records,
// which the engine gives as the request did).
func SizeGetResponse(m *pb.GetResponse) (size int, ok bool) {
	if len(m.MissingKeys) > 0 || len(m.MissingKeyRecords) > 0 || len(m.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n, ok := sizeRecords(m.Records)
	return n + sizePacked(m.Missing) + sizePacked(m.Unanswered) + sizePacked(m.Versions), ok
}

// AppendGetResponse appends m, which SizeGetResponse accepted.
func AppendGetResponse(b []byte, m *pb.GetResponse) []byte {
	b = appendRecords(b, GetResponseRecords, m.Records)
	b = appendPacked(b, GetResponseMissing, m.Missing)
	b = appendPacked(b, GetResponseUnanswered, m.Unanswered)
	return appendPacked(b, GetResponseVersions, m.Versions)
}

// SizeQueryResponse is the encoded size of m; ok is false when m has a
// shape AppendQueryResponse does not cover (a plan, aggregate rows, a
// page token that is not UTF-8).
func SizeQueryResponse(m *pb.QueryResponse) (size int, ok bool) {
	if m.Plan != nil || len(m.Rows) > 0 || !utf8.ValidString(m.NextPageToken) || len(m.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n, ok := sizeRecords(m.Records)
	return n + sizeBytesField(len(m.NextPageToken)) + sizeVarintField(m.Count) + sizePacked(m.Versions), ok
}

// AppendQueryResponse appends m, which SizeQueryResponse accepted.
func AppendQueryResponse(b []byte, m *pb.QueryResponse) []byte {
	b = appendRecords(b, QueryResponseRecords, m.Records)
	b = appendStringField(b, QueryResponseNextPageToken, m.NextPageToken)
	b = appendVarintField(b, QueryResponseCount, m.Count)
	return appendPacked(b, QueryResponseVersions, m.Versions)
}
