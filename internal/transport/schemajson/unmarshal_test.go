package schemajson

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
)

func TestUnmarshalNamesTheRecord(t *testing.T) {
	opts := protojson.UnmarshalOptions{Resolver: New(nil)}
	idx := "type.googleapis.com/protobase.v1.Index"
	var wr pb.WriteRequest
	err := Unmarshal(opts, []byte(`{"records": [{"@type": "`+idx+`", "name": "a"}, {"@type": "`+idx+`", "unique": "maybe"}]}`), &wr)
	var e *apierror.Error
	if !errors.As(err, &e) || e.Code != apierror.InvalidArgument || e.Write.GetRecord() != 1 || e.Write.GetTypeUrl() != idx {
		t.Fatalf("error %v (%+v)", err, e)
	}
	// An unknown type is passed on for the engine to refuse.
	err = Unmarshal(opts, []byte(`{"records": [{"@type": "`+idx+`"}, {"@type": "type.googleapis.com/x.Nope", "id": 1}]}`), &wr)
	if err != nil || len(wr.Records) != 2 || wr.Records[1].TypeUrl != "type.googleapis.com/x.Nope" || wr.Records[1].Value != nil {
		t.Fatalf("unknown type: %v %v", err, &wr)
	}
	var a anypb.Any
	if err := Unmarshal(opts, []byte(`{"@type": "type.googleapis.com/x.Nope"}`), &a); err != nil || a.TypeUrl != "type.googleapis.com/x.Nope" {
		t.Fatalf("unknown key type: %v %v", err, &a)
	}
}

// FuzzUnmarshal: hostile JSON for every message a JSON transport decodes
// gives a message or an INVALID_ARGUMENT *apierror.Error, never a panic.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"records": [{"@type": "type.googleapis.com/protobase.v1.Index", "name": "a"}]}`,
		`{"records": [{"@type": "type.googleapis.com/x.Nope", "id": "1"}, 7]}`,
		`{"@type": "type.googleapis.com/protobase.v1.Index", "fields": ["a", null]}`,
		`{"query": {"type": "t", "where": {"and": {"exprs": [{"cmp": {"op": "OP_EQ"}}]}}}, "pageSize": -1}`,
		`{"op": 9, "records": null, "records": []}`,
	} {
		f.Add([]byte(s))
	}
	opts := protojson.UnmarshalOptions{Resolver: New(nil)}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []proto.Message{new(pb.WriteRequest), new(pb.WriteStreamRequest), new(anypb.Any), new(pb.QueryRequest), new(pb.GetSchemaRequest)} {
			err := Unmarshal(opts, b, m)
			if err == nil {
				continue
			}
			var e *apierror.Error
			if !errors.As(err, &e) || e.Code != apierror.InvalidArgument {
				t.Fatalf("%T: error %T %v", m, err, err)
			}
		}
	})
}
