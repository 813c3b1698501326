// Package wire owns the hand-written protobuf coders of the public API's
// messages (protobase.v1): the encoders and decoders that read and write
// the wire bytes of the messages sent by the million instead of going
// through the generated code, and the field numbers they use. The speed
// they buy is measured where each is described. Each coder gives what the
// generated code gives: the same bytes as proto.Marshal, or the same
// message and the same error as proto.Unmarshal; for a shape it does not
// cover it hands the message to the generated code.
//
// The hand-coded messages, by direction, and what each does with what it
// does not cover:
//
//	decoded (server: the gRPC codec; engine: lookups from request bytes)
//	  SearchRequest, QueryRequest, Query, Expr, Comparison, Value
//	      DecodeSearchRequest, DecodeQueryRequest, ReadQuery, ReadOperand:
//	      a query other than
//	      one comparison of one scalar operand (order, filter, and/or/not,
//	      a list, a double or enum operand) is decoded by proto.Unmarshal
//	  GetRequest, google.protobuf.Value   DecodeGetRequest: key records and
//	      keys other than one number, string or bool are decoded by
//	      proto.Unmarshal
//	  WriteRequest, WriteStreamRequest, google.protobuf.Any
//	      DecodeWriteRequest, DecodeWriteStreamRequest, DecodeRecords
//	decoded (Go client)
//	  ScanResponse, QueryResponse, GetResponse   DecodeScanResponse,
//	      DecodeQueryResponse, DecodeGetResponse (the keys of missing
//	      records through proto.Unmarshal)
//	  SearchResponse, ResultBatch, QueryDone   DecodeSearchResponse (a
//	      QueryDone with a plan, QueryError and a batch's Plan through
//	      proto.Unmarshal)
//	  WatchResponse, Change, Position   DecodeWatchResponse, WatchSlabs
//	encoded (server: the gRPC codec)
//	  SearchResponse, ResultBatch, QueryDone, ScanResponse, GetResponse,
//	  QueryResponse, google.protobuf.Any
//	      SizeSearchResponse and AppendSearchResponse, SizeScanResponse and
//	      AppendScanResponse, SizeGetResponse and AppendGetResponse,
//	      SizeQueryResponse and AppendQueryResponse: errors, plans,
//	      aggregate rows, the keys of missing records and unknown fields at
//	      the top are left to proto.Marshal
//	encoded (Go client: its read codec)
//	  GetRequest, google.protobuf.Value   SizeGetRequest and
//	      AppendGetRequest: key records and keys other than one number,
//	      string or bool are left to proto.Marshal
//	  QueryRequest, Query, Expr, Comparison, Value   SizeQueryRequest and
//	      AppendQueryRequest: a query other than one comparison of one
//	      operand (order, filter, aggregate, and/or/not, a list) and
//	      unknown fields are left to proto.Marshal
//	encoded (engine: search responses written from records' bytes)
//	  SearchResponse, ResultBatch, QueryDone, google.protobuf.Any
//	      AppendResult, AppendResultHeader, AppendRecord, AppendVersions,
//	      AppendDone, AppendQueryError (searchwriters.go, versions.go),
//	      called by internal/engine
//	      (searchenc.go, searchrange.go) for lookups and lone queries: a
//	      QueryError through proto.Marshal; a query with an explain plan
//	      takes the engine's message path
//	encoded elsewhere, with this package's field writers and numbers
//	  WatchResponse, Change, Position, google.protobuf.Any
//	      internal/watch (encode.go): written from change-log entries with
//	      AppendAnyField, AppendVarint, AppendString (fieldwriters.go) and
//	      AppendPosition (watchwriters.go); nothing falls back
//
// A decoder falls back to proto.Unmarshal for anything outside its shape:
// an unknown field, a field in another wire type, a message field repeated
// on the wire (which proto.Unmarshal merges), invalid UTF-8, malformed or
// truncated bytes. Coders (coverage.go) declares, for each coder and
// message, the fields it handles and those it falls back for;
// TestCodersCoverDescriptors fails when the API gains a field that a coder
// neither handles nor falls back for, which would otherwise be dropped
// without a word.
package wire
