package wire

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Every number here is the generated descriptor's number for its field.
func TestNumbersMatchDescriptors(t *testing.T) {
	for _, tc := range []struct {
		num   protowire.Number
		msg   proto.Message
		field protoreflect.Name
	}{
		{AnyTypeURL, &anypb.Any{}, "type_url"},
		{AnyValue, &anypb.Any{}, "value"},
		{SearchRequestQueries, &pb.SearchRequest{}, "queries"},
		{QueryRequestQuery, &pb.QueryRequest{}, "query"},
		{QueryRequestPageSize, &pb.QueryRequest{}, "page_size"},
		{QueryRequestPageToken, &pb.QueryRequest{}, "page_token"},
		{QueryType, &pb.Query{}, "type"},
		{QueryWhere, &pb.Query{}, "where"},
		{QueryLimit, &pb.Query{}, "limit"},
		{QueryKeysOnly, &pb.Query{}, "keys_only"},
		{QueryExplain, &pb.Query{}, "explain"},
		{QueryCount, &pb.Query{}, "count"},
		{ExprCmp, &pb.Expr{}, "cmp"},
		{ComparisonField, &pb.Comparison{}, "field"},
		{ComparisonOp, &pb.Comparison{}, "op"},
		{ComparisonValue, &pb.Comparison{}, "value"},
		{ValueInt, &pb.Value{}, "int"},
		{ValueUint, &pb.Value{}, "uint"},
		{ValueBool, &pb.Value{}, "bool"},
		{ValueString, &pb.Value{}, "string"},
		{ValueBytes, &pb.Value{}, "bytes"},
		{ValueDouble, &pb.Value{}, "double"},
		{ValueEnum, &pb.Value{}, "enum"},
		{SearchResponseResults, &pb.SearchResponse{}, "results"},
		{SearchResponseDone, &pb.SearchResponse{}, "done"},
		{SearchResponseErrors, &pb.SearchResponse{}, "errors"},
		{ResultBatchQuery, &pb.ResultBatch{}, "query"},
		{ResultBatchRecords, &pb.ResultBatch{}, "records"},
		{ResultBatchPlan, &pb.ResultBatch{}, "plan"},
		{QueryDoneQuery, &pb.QueryDone{}, "query"},
		{QueryDoneCount, &pb.QueryDone{}, "count"},
		{ScanResponseRecords, &pb.ScanResponse{}, "records"},
		{ScanResponseCount, &pb.ScanResponse{}, "count"},
		{ScanResponseDone, &pb.ScanResponse{}, "done"},
		{QueryResponseRecords, &pb.QueryResponse{}, "records"},
		{QueryResponseNextPageToken, &pb.QueryResponse{}, "next_page_token"},
		{QueryResponseCount, &pb.QueryResponse{}, "count"},
		{QueryResponseVersions, &pb.QueryResponse{}, "versions"},
		{GetRequestType, &pb.GetRequest{}, "type"},
		{GetRequestKeys, &pb.GetRequest{}, "keys"},
		{GetRequestKeyRecords, &pb.GetRequest{}, "key_records"},
		{GetRequestVersions, &pb.GetRequest{}, "versions"},
		{GetResponseRecords, &pb.GetResponse{}, "records"},
		{GetResponseMissing, &pb.GetResponse{}, "missing"},
		{GetResponseUnanswered, &pb.GetResponse{}, "unanswered"},
		{GetResponseVersions, &pb.GetResponse{}, "versions"},
		{GetResponseMissingKeys, &pb.GetResponse{}, "missing_keys"},
		{GetResponseMissingKeyRecords, &pb.GetResponse{}, "missing_key_records"},
		{JSONNull, &structpb.Value{}, "null_value"},
		{JSONNumber, &structpb.Value{}, "number_value"},
		{JSONString, &structpb.Value{}, "string_value"},
		{JSONBool, &structpb.Value{}, "bool_value"},
		{JSONStruct, &structpb.Value{}, "struct_value"},
		{JSONList, &structpb.Value{}, "list_value"},
		{WriteRequestRecords, &pb.WriteRequest{}, "records"},
		{WriteStreamRequestOp, &pb.WriteStreamRequest{}, "op"},
		{WriteStreamRequestRecords, &pb.WriteStreamRequest{}, "records"},
		{WriteStreamRequestAck, &pb.WriteStreamRequest{}, "ack"},
		{WriteRequestConditions, &pb.WriteRequest{}, "conditions"},
		{WriteStreamRequestConditions, &pb.WriteStreamRequest{}, "conditions"},
		{WriteStreamRequestFields, &pb.WriteStreamRequest{}, "fields"},
		{WriteStreamRequestAdd, &pb.WriteStreamRequest{}, "add"},
		{WriteStreamRequestOps, &pb.WriteStreamRequest{}, "ops"},
		{ConditionRecord, &pb.Condition{}, "record"},
		{ConditionKey, &pb.Condition{}, "key"},
		{ConditionQuery, &pb.Condition{}, "query"},
		{ConditionVersion, &pb.Condition{}, "version"},
		{ConditionFilter, &pb.Condition{}, "filter"},
		{ConditionCount, &pb.Condition{}, "count"},
		{ConditionMaxVersion, &pb.Condition{}, "max_version"},
		{WatchResponseChanges, &pb.WatchResponse{}, "changes"},
		{WatchResponseProgress, &pb.WatchResponse{}, "progress"},
		{ChangeOp, &pb.Change{}, "op"},
		{ChangeType, &pb.Change{}, "type"},
		{ChangeKey, &pb.Change{}, "key"},
		{ChangeRecord, &pb.Change{}, "record"},
		{ChangeOld, &pb.Change{}, "old_record"},
		{ChangePosition, &pb.Change{}, "position"},
		{ChangeOldOmit, &pb.Change{}, "old_record_omitted"},
		{ChangeRecOmit, &pb.Change{}, "record_omitted"},
		{ChangeExpired, &pb.Change{}, "expired"},
		{PositionCommit, &pb.Position{}, "commit"},
		{PositionIndex, &pb.Position{}, "index"},
	} {
		md := tc.msg.ProtoReflect().Descriptor()
		fd := md.Fields().ByName(tc.field)
		if fd == nil {
			t.Errorf("%s has no field %s", md.FullName(), tc.field)
			continue
		}
		if fd.Number() != tc.num {
			t.Errorf("%s.%s is field %d, wire says %d", md.FullName(), tc.field, fd.Number(), tc.num)
		}
	}
}
