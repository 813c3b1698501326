package wire

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Direction says whether a coder writes or reads a message's bytes.
type Direction int

const (
	// Encodes is a coder that writes a message's bytes.
	Encodes Direction = iota
	// Decodes is a coder that reads them.
	Decodes
)

func (d Direction) String() string {
	if d == Encodes {
		return "encoder"
	}
	return "decoder"
}

// Coverage is what one hand-written coder does with the fields of one
// message: Handles lists the fields it writes or reads itself (or hands,
// whole, to the generated code for that field alone), FallsBack those
// whose presence sends the whole message to the generated code (or, for
// the coders outside this package, to their message path).
type Coverage struct {
	Message   protoreflect.FullName
	Coder     string
	Direction Direction
	Handles   []protowire.Number
	FallsBack []protowire.Number
}

// Coders is the coverage of every hand-written coder of an API message,
// this package's and those elsewhere that write with its field numbers.
var Coders = []Coverage{
	// Decoders of requests.
	{"protobase.v1.SearchRequest", "DecodeSearchRequest", Decodes, nums(SearchRequestQueries), nil},
	{"protobase.v1.GetRequest", "DecodeGetRequest", Decodes, nums(GetRequestType, GetRequestKeys, GetRequestVersions), nums(GetRequestKeyRecords)},
	{"google.protobuf.Value", "DecodeGetRequest", Decodes, nums(JSONNumber, JSONString, JSONBool), nums(JSONNull, JSONStruct, JSONList)},
	{"protobase.v1.QueryRequest", "DecodeQueryRequest", Decodes, nums(QueryRequestQuery, QueryRequestPageSize, QueryRequestPageToken), nil},
	{"protobase.v1.Query", "ReadQuery", Decodes, nums(QueryType, QueryWhere, QueryLimit, QueryKeysOnly, QueryExplain, QueryCount, QueryVersions), nums(4, 8, 10)}, // order, filter, aggregate
	{"protobase.v1.Expr", "ReadQuery", Decodes, nums(ExprCmp), nums(2, 3, 4)},                                                                                     // and, or, not
	{"protobase.v1.Comparison", "ReadQuery", Decodes, nums(ComparisonField, ComparisonOp, ComparisonValue), nums(4)},                                              // values
	{"protobase.v1.Value", "ReadOperand", Decodes, nums(ValueInt, ValueUint, ValueBool, ValueString, ValueBytes), nums(3, 7)},                                     // double, enum
	{"protobase.v1.WriteRequest", "DecodeWriteRequest", Decodes, nums(WriteRequestRecords, WriteRequestConditions), nil},
	{"protobase.v1.WriteStreamRequest", "DecodeWriteStreamRequest", Decodes, nums(WriteStreamRequestOp, WriteStreamRequestRecords, WriteStreamRequestAck,
		WriteStreamRequestConditions, WriteStreamRequestFields, WriteStreamRequestAdd, WriteStreamRequestOps), nil},
	{"protobase.v1.Condition", "DecodeWriteStreamRequest", Decodes, nums(ConditionRecord, ConditionVersion),
		nums(ConditionKey, ConditionQuery, ConditionFilter, ConditionCount, ConditionMaxVersion)},
	{"google.protobuf.Any", "DecodeRecords, FillAny, DecodeAny", Decodes, nums(AnyTypeURL, AnyValue), nil},

	// Decoders of responses (the Go client).
	{"protobase.v1.ScanResponse", "DecodeScanResponse", Decodes, nums(ScanResponseRecords, ScanResponseCount, ScanResponseDone, ScanResponseVersions), nums(4)},                   // plan
	{"protobase.v1.QueryResponse", "DecodeQueryResponse", Decodes, nums(QueryResponseRecords, QueryResponseNextPageToken, QueryResponseCount, QueryResponseVersions), nums(3, 6)}, // plan, rows
	{"protobase.v1.GetResponse", "DecodeGetResponse", Decodes, nums(GetResponseRecords, GetResponseMissing, GetResponseUnanswered, GetResponseVersions),
		nums(GetResponseMissingKeys, GetResponseMissingKeyRecords)},
	{"protobase.v1.SearchResponse", "DecodeSearchResponse", Decodes, nums(SearchResponseResults, SearchResponseDone, SearchResponseErrors), nil},
	{"protobase.v1.ResultBatch", "DecodeSearchResponse", Decodes, nums(ResultBatchQuery, ResultBatchRecords, ResultBatchPlan, ResultBatchVersions), nil},
	{"protobase.v1.QueryDone", "DecodeSearchResponse", Decodes, nums(QueryDoneQuery, QueryDoneCount), nums(3)}, // plan
	{"protobase.v1.WatchResponse", "DecodeWatchResponse", Decodes, nums(WatchResponseChanges, WatchResponseProgress), nil},
	{"protobase.v1.Change", "DecodeWatchResponse", Decodes, nums(ChangeOp, ChangeType, ChangeKey, ChangeRecord, ChangeOld, ChangePosition, ChangeOldOmit, ChangeRecOmit, ChangeExpired), nil},
	{"protobase.v1.Position", "DecodeWatchResponse", Decodes, nums(PositionCommit, PositionIndex), nil},

	// Encoders of responses (the gRPC codec).
	{"protobase.v1.SearchResponse", "AppendSearchResponse", Encodes, nums(SearchResponseResults, SearchResponseDone), nums(SearchResponseErrors)},
	{"protobase.v1.ResultBatch", "AppendSearchResponse", Encodes, nums(ResultBatchQuery, ResultBatchRecords, ResultBatchVersions), nums(ResultBatchPlan)},
	{"protobase.v1.QueryDone", "AppendSearchResponse", Encodes, nums(QueryDoneQuery, QueryDoneCount), nums(3)},                                                  // plan
	{"protobase.v1.ScanResponse", "AppendScanResponse", Encodes, nums(ScanResponseRecords, ScanResponseCount, ScanResponseDone, ScanResponseVersions), nums(4)}, // plan
	{"protobase.v1.GetResponse", "AppendGetResponse", Encodes, nums(GetResponseRecords, GetResponseMissing, GetResponseUnanswered, GetResponseVersions),
		nums(GetResponseMissingKeys, GetResponseMissingKeyRecords)},
	{"protobase.v1.QueryResponse", "AppendQueryResponse", Encodes, nums(QueryResponseRecords, QueryResponseNextPageToken, QueryResponseCount, QueryResponseVersions), nums(3, 6)}, // plan, rows
	{"google.protobuf.Any", "AppendSearchResponse, AppendScanResponse, AppendGetResponse, AppendQueryResponse", Encodes, nums(AnyTypeURL, AnyValue), nil},

	// Encoders of requests (the Go client); AppendSearchRequest writes its
	// queries with AppendQueryRequest's query writer.
	{"protobase.v1.SearchRequest", "AppendSearchRequest", Encodes, nums(SearchRequestQueries), nil},
	{"protobase.v1.GetRequest", "AppendGetRequest", Encodes, nums(GetRequestType, GetRequestKeys, GetRequestVersions), nums(GetRequestKeyRecords)},
	{"google.protobuf.Value", "AppendGetRequest", Encodes, nums(JSONNumber, JSONString, JSONBool), nums(JSONNull, JSONStruct, JSONList)},
	{"protobase.v1.QueryRequest", "AppendQueryRequest", Encodes, nums(QueryRequestQuery, QueryRequestPageSize, QueryRequestPageToken), nil},
	{"protobase.v1.Query", "AppendQueryRequest, AppendSearchRequest", Encodes, nums(QueryType, QueryWhere, QueryLimit, QueryKeysOnly, QueryExplain, QueryCount, QueryVersions), nums(4, 8, 10)}, // order, filter, aggregate
	{"protobase.v1.Expr", "AppendQueryRequest, AppendSearchRequest", Encodes, nums(ExprCmp), nums(2, 3, 4)},                                                                                     // and, or, not
	{"protobase.v1.Comparison", "AppendQueryRequest, AppendSearchRequest", Encodes, nums(ComparisonField, ComparisonOp, ComparisonValue), nums(4)},                                              // values
	{"protobase.v1.Value", "AppendQueryRequest, AppendSearchRequest", Encodes, nums(ValueInt, ValueUint, ValueDouble, ValueBool, ValueString, ValueBytes, ValueEnum), nil},

	// Writers of responses from records' bytes: the engine's search
	// responses (searchwriters.go), the Any and Position fields of those
	// and of internal/watch's WatchResponses (fieldwriters.go,
	// watchwriters.go). A plan sends the engine to its message path.
	{"protobase.v1.SearchResponse", searchWriters, Encodes, nums(SearchResponseResults, SearchResponseDone, SearchResponseErrors), nil},
	{"protobase.v1.ResultBatch", searchWriters, Encodes, nums(ResultBatchQuery, ResultBatchRecords, ResultBatchVersions), nums(ResultBatchPlan)},
	{"protobase.v1.QueryDone", searchWriters, Encodes, nums(QueryDoneQuery, QueryDoneCount), nums(3)}, // plan
	{"google.protobuf.Any", "AppendAnyField, AppendRecord, AppendResult", Encodes, nums(AnyTypeURL, AnyValue), nil},
	{"protobase.v1.Position", "AppendPosition", Encodes, nums(PositionCommit, PositionIndex), nil},

	// Encoders elsewhere, with these writers and field numbers.
	{"protobase.v1.WatchResponse", "internal/watch respEnc", Encodes, nums(WatchResponseChanges, WatchResponseProgress), nil},
	{"protobase.v1.Change", "internal/watch respEnc", Encodes, nums(ChangeOp, ChangeType, ChangeKey, ChangeRecord, ChangeOld, ChangePosition, ChangeOldOmit, ChangeRecOmit, ChangeExpired), nil},
}

// searchWriters names the engine's search writers in Coders.
const searchWriters = "AppendResult, AppendResultHeader, AppendRecord, AppendVersions, AppendDone, AppendQueryError"

func nums(n ...protowire.Number) []protowire.Number { return n }

// Uncovered checks the coverage cs against the messages find returns (the
// generated descriptors, or any others of the same names) and describes
// each problem: a coded message find does not know, a field that its
// coder neither handles nor falls back for, and a field declared that the
// message does not have.
func Uncovered(cs []Coverage, find func(protoreflect.FullName) protoreflect.MessageDescriptor) []string {
	var out []string
	for _, c := range cs {
		md := find(c.Message)
		if md == nil {
			out = append(out, fmt.Sprintf("%s (%s %s): no such message", c.Message, c.Coder, c.Direction))
			continue
		}
		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if !slices.Contains(c.Handles, fd.Number()) && !slices.Contains(c.FallsBack, fd.Number()) {
				out = append(out, fmt.Sprintf("%s field %d (%s): the %s %s neither handles it nor falls back for it",
					c.Message, fd.Number(), fd.Name(), c.Coder, c.Direction))
			}
		}
		for _, n := range slices.Concat(c.Handles, c.FallsBack) {
			if fields.ByNumber(n) == nil {
				out = append(out, fmt.Sprintf("%s (%s %s): declares field %d, which the message does not have", c.Message, c.Coder, c.Direction, n))
			}
		}
	}
	return out
}
