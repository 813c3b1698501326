package wire

import (
	"encoding/binary"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The engine writes the SearchResponses of lookups and lone queries as
// wire bytes straight from the records' bytes, with no ResultBatch,
// QueryDone or Any message built, sized and encoded per record: those
// were a quarter of the server's CPU on batched lookups. These are its
// writers of a response's fields; a response is its results, then its
// completions, then its errors, each written with the writers below, in
// field-number order as proto.Marshal writes them, which gives
// proto.Marshal's bytes (TestSearchWritersMatchProto). A query with an
// explain plan takes the message path.

// The one-byte tags the writers write.
const (
	tagSearchResults = byte(SearchResponseResults)<<3 | byte(protowire.BytesType)
	tagSearchDone    = byte(SearchResponseDone)<<3 | byte(protowire.BytesType)
	tagSearchErrors  = byte(SearchResponseErrors)<<3 | byte(protowire.BytesType)
	tagResultQuery   = byte(ResultBatchQuery)<<3 | byte(protowire.VarintType)
	tagResultRecords = byte(ResultBatchRecords)<<3 | byte(protowire.BytesType)
	tagDoneQuery     = byte(QueryDoneQuery)<<3 | byte(protowire.VarintType)
	tagDoneCount     = byte(QueryDoneCount)<<3 | byte(protowire.VarintType)
)

// MaxResultHeader bounds what AppendResultHeader writes: a tag, a length
// of up to 5 bytes (a batch of less than 32 GiB), the query's tag and id.
const MaxResultHeader = 1 + 5 + 1 + binary.MaxVarintLen64

// AppendResultHeader appends the start of a SearchResponse.results field
// holding a ResultBatch of query id whose records, written after it with
// AppendRecord, and versions, written after them with AppendVersions,
// take n bytes. A writer that learns n only once the
// records are written leaves MaxResultHeader bytes before them and
// writes the header at the end of that room.
func AppendResultHeader(b []byte, id uint64, n int) []byte {
	if id != 0 {
		n += 1 + protowire.SizeVarint(id)
	}
	b = AppendVarint(append(b, tagSearchResults), uint64(n))
	if id != 0 {
		b = AppendVarint(append(b, tagResultQuery), id)
	}
	return b
}

// AppendRecord appends a ResultBatch.records field: an Any whose encoded
// type_url field is urlField (AppendString of AnyTypeURL), holding rec.
func AppendRecord(b []byte, urlField, rec []byte) []byte {
	return AppendAnyField(b, tagResultRecords, SizeAny(len(urlField), len(rec)), urlField, rec)
}

// AppendResult appends a SearchResponse.results field holding a
// ResultBatch of query id with the one record rec (as AppendRecord).
func AppendResult(b []byte, id uint64, urlField, rec []byte) []byte {
	size := SizeAny(len(urlField), len(rec))
	b = AppendResultHeader(b, id, 1+protowire.SizeVarint(uint64(size))+size)
	return AppendAnyField(b, tagResultRecords, size, urlField, rec)
}

// AppendDone appends a SearchResponse.done field: the QueryDone of query
// id with count matches. It is at most 22 bytes, so its length takes one
// byte.
func AppendDone(b []byte, id, count uint64) []byte {
	size := 0
	if id != 0 {
		size += 1 + protowire.SizeVarint(id)
	}
	if count != 0 {
		size += 1 + protowire.SizeVarint(count)
	}
	b = append(b, tagSearchDone, byte(size))
	if id != 0 {
		b = AppendVarint(append(b, tagDoneQuery), id)
	}
	if count != 0 {
		b = AppendVarint(append(b, tagDoneCount), count)
	}
	return b
}

// AppendQueryError appends a SearchResponse.errors field holding qe,
// encoded by proto.Marshal: errors are few. A message or field name that
// is not valid UTF-8, which proto.Marshal refuses, is written with each
// invalid sequence replaced by U+FFFD, so that the query still gets its
// error and the response stays well formed.
func AppendQueryError(b []byte, qe *pb.QueryError) []byte {
	if !utf8.ValidString(qe.GetMessage()) || !utf8.ValidString(qe.GetField()) {
		qe = proto.Clone(qe).(*pb.QueryError)
		qe.Message = strings.ToValidUTF8(qe.Message, "\uFFFD")
		qe.Field = strings.ToValidUTF8(qe.Field, "\uFFFD")
	}
	b = append(b, tagSearchErrors)
	b = AppendVarint(b, uint64(proto.Size(qe)))
	b, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, qe) // its strings are UTF-8: it encodes
	return b
}
