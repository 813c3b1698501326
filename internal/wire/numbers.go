package wire

import "google.golang.org/protobuf/encoding/protowire"

// The field numbers of the messages coded by hand, each written once;
// TestNumbersMatchDescriptors checks every one against the generated
// descriptors, so a renumbered .proto cannot leave a hand-written coder
// behind.

// google.protobuf.Any.
const (
	AnyTypeURL protowire.Number = 1
	AnyValue   protowire.Number = 2
)

// SearchRequest and the messages of a query.
const (
	SearchRequestQueries protowire.Number = 1

	QueryType     protowire.Number = 1
	QueryWhere    protowire.Number = 2
	QueryLimit    protowire.Number = 3
	QueryKeysOnly protowire.Number = 5
	QueryExplain  protowire.Number = 6
	QueryCount    protowire.Number = 7
	QueryVersions protowire.Number = 9

	ExprCmp protowire.Number = 1

	ComparisonField protowire.Number = 1
	ComparisonOp    protowire.Number = 2
	ComparisonValue protowire.Number = 3

	ValueInt    protowire.Number = 1
	ValueUint   protowire.Number = 2
	ValueDouble protowire.Number = 3
	ValueBool   protowire.Number = 4
	ValueString protowire.Number = 5
	ValueBytes  protowire.Number = 6
	ValueEnum   protowire.Number = 7
)

// QueryRequest.
const (
	QueryRequestQuery     protowire.Number = 1
	QueryRequestPageSize  protowire.Number = 2
	QueryRequestPageToken protowire.Number = 3
)

// SearchResponse and its parts.
const (
	SearchResponseResults protowire.Number = 1
	SearchResponseDone    protowire.Number = 2
	SearchResponseErrors  protowire.Number = 3

	ResultBatchQuery    protowire.Number = 1
	ResultBatchRecords  protowire.Number = 2
	ResultBatchPlan     protowire.Number = 3
	ResultBatchVersions protowire.Number = 4

	QueryDoneQuery protowire.Number = 1
	QueryDoneCount protowire.Number = 2
)

// ScanResponse and QueryResponse.
const (
	ScanResponseRecords  protowire.Number = 1
	ScanResponseCount    protowire.Number = 2
	ScanResponseDone     protowire.Number = 3
	ScanResponseVersions protowire.Number = 5

	QueryResponseRecords       protowire.Number = 1
	QueryResponseNextPageToken protowire.Number = 2
	QueryResponseCount         protowire.Number = 4
	QueryResponseVersions      protowire.Number = 5
)

// GetRequest and GetResponse.
const (
	GetRequestType       protowire.Number = 1
	GetRequestKeys       protowire.Number = 2
	GetRequestKeyRecords protowire.Number = 3
	GetRequestVersions   protowire.Number = 4

	GetResponseRecords           protowire.Number = 1
	GetResponseMissing           protowire.Number = 2
	GetResponseUnanswered        protowire.Number = 3
	GetResponseVersions          protowire.Number = 4
	GetResponseMissingKeys       protowire.Number = 5
	GetResponseMissingKeyRecords protowire.Number = 6
)

// google.protobuf.Value, a JSON value: the keys of a GetRequest.
const (
	JSONNull   protowire.Number = 1
	JSONNumber protowire.Number = 2
	JSONString protowire.Number = 3
	JSONBool   protowire.Number = 4
	JSONStruct protowire.Number = 5
	JSONList   protowire.Number = 6
)

// WriteRequest and WriteStreamRequest.
const (
	WriteRequestRecords    protowire.Number = 1
	WriteRequestConditions protowire.Number = 2

	WriteStreamRequestOp         protowire.Number = 1
	WriteStreamRequestRecords    protowire.Number = 2
	WriteStreamRequestAck        protowire.Number = 3
	WriteStreamRequestConditions protowire.Number = 4
	WriteStreamRequestFields     protowire.Number = 5
	WriteStreamRequestAdd        protowire.Number = 6
	WriteStreamRequestOps        protowire.Number = 7
)

// WatchResponse and its changes.
const (
	WatchResponseChanges  protowire.Number = 1
	WatchResponseProgress protowire.Number = 2

	ChangeOp       protowire.Number = 1
	ChangeType     protowire.Number = 2
	ChangeKey      protowire.Number = 3
	ChangeRecord   protowire.Number = 4
	ChangeOld      protowire.Number = 5
	ChangePosition protowire.Number = 6
	ChangeOldOmit  protowire.Number = 7
	ChangeRecOmit  protowire.Number = 8
	ChangeExpired  protowire.Number = 9

	PositionCommit protowire.Number = 1
	PositionIndex  protowire.Number = 2
)
