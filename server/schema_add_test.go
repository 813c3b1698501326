package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// invProto is a record type in a file of its own, added beside shop.proto.
const invProto = `syntax = "proto3";
package inv;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = { primary_key: "sku" index: { fields: "count" } };
  string sku = 1;
  int32 count = 2;
}
`

// shopNoEmail is shopProto without the unique email index.
var shopNoEmail = strings.Replace(shopProto, "    index: { fields: \"email\" unique: true }\n", "", 1)

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func schemaFiles(t *testing.T, ts *testServer) []string {
	t.Helper()
	s, err := ts.C.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range s.GetFiles() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func wantSchemaCode(t *testing.T, err error, code codes.Code, field, text string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code || !strings.Contains(st.Message(), text) {
		t.Fatalf("error %v, want %v containing %q", err, code, text)
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == field {
					return
				}
			}
		}
	}
	t.Fatalf("error %v names no field %q", st.Proto(), field)
}

func TestApplySchemaAdd(t *testing.T) {
	ts := startServer(t, server.Config{NoSync: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
	add := client.SchemaOptions{Add: true}

	// Whole-state stays the default: inv.proto alone would drop the shop.
	_, err := ts.Apply(map[string]string{"inv.proto": invProto}, client.SchemaOptions{})
	wantSchemaCode(t, err, codes.FailedPrecondition, "type shop.User", "would be dropped with its 1 records")

	resp, err := ts.Apply(map[string]string{"inv.proto": invProto}, add)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.GetPlan()
	if !resp.GetApplied() || !slices.Equal(p.GetTypesAdded(), []string{"inv.Item"}) || !slices.Equal(p.GetFilesAdded(), []string{"inv.proto"}) ||
		len(p.GetTypesDropped())+len(p.GetIndexesDropped())+len(p.GetFilesRemoved())+len(p.GetFilesChanged()) != 0 {
		t.Fatalf("add plan %v", resp)
	}
	if got := schemaFiles(t, ts); !slices.Equal(got, []string{"inv.proto", "shop.proto"}) {
		t.Fatalf("files after add: %v", got)
	}
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("inv.Item", `{"sku": "a", "count": 2}`)})

	// The same file again is no change; a file of the same name replaces it.
	if resp, err = ts.Apply(map[string]string{"inv.proto": invProto}, add); err != nil || resp.GetApplied() {
		t.Fatalf("re-add: %v %v", resp, err)
	}
	changed := strings.Replace(invProto, "int32 count = 2;", "int32 count = 2;\n  string place = 3;", 1)
	if resp, err = ts.Apply(map[string]string{"inv.proto": changed}, add); err != nil ||
		!slices.Equal(resp.GetPlan().GetFilesChanged(), []string{"inv.proto"}) || len(resp.GetPlan().GetTypesChanged()) != 1 {
		t.Fatalf("replace: %v %v", resp, err)
	}

	// Removing a file by name: its type with records is dropped only when
	// allowed, and every index of the type is listed as dropped.
	_, err = ts.Apply(nil, client.SchemaOptions{Add: true, Remove: []string{"inv.proto"}})
	wantSchemaCode(t, err, codes.FailedPrecondition, "type inv.Item", "would be dropped with its 1 records")
	resp, err = ts.Apply(nil, client.SchemaOptions{Add: true, Remove: []string{"inv.proto"}, AllowDrop: []string{"inv.Item"}, DryRun: true})
	if err != nil || resp.GetApplied() || len(resp.GetPlan().GetTypesDropped()) != 1 || len(resp.GetPlan().GetIndexesDropped()) != 1 ||
		resp.GetPlan().GetIndexesDropped()[0].GetIndex() != "count" {
		t.Fatalf("dry-run remove: %v %v", resp, err)
	}
	if _, err = ts.Apply(nil, client.SchemaOptions{Add: true, Remove: []string{"inv.proto"}, AllowDrop: []string{"inv.Item"}}); err != nil {
		t.Fatal(err)
	}
	if got := schemaFiles(t, ts); !slices.Equal(got, []string{"shop.proto"}) {
		t.Fatalf("files after remove: %v", got)
	}

	// Bad requests name what is wrong.
	_, err = ts.Apply(nil, client.SchemaOptions{Add: true, Remove: []string{"nope.proto"}})
	wantSchemaCode(t, err, codes.InvalidArgument, "remove_files", "file nope.proto is not in the schema")
	_, err = ts.Apply(map[string]string{"shop.proto": shopProto}, client.SchemaOptions{Remove: []string{"shop.proto"}})
	wantSchemaCode(t, err, codes.InvalidArgument, "remove_files", "remove_files needs mode SCHEMA_MODE_ADD")
	_, err = ts.Apply(map[string]string{"shop.proto": shopProto}, client.SchemaOptions{Add: true, Remove: []string{"shop.proto"}})
	wantSchemaCode(t, err, codes.InvalidArgument, "remove_files", "file shop.proto is both added and removed")
	_, err = ts.Apply(map[string]string{"bad.proto": "syntax = \"proto3\";\nmessage {"}, add)
	wantSchemaCode(t, err, codes.InvalidArgument, "bad.proto:2:9", "schema does not compile")
}

func TestApplySchemaIndexDropNeedsNaming(t *testing.T) {
	ts := startServer(t, server.Config{NoSync: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto})

	for _, opts := range []client.SchemaOptions{{}, {DryRun: true}, {Add: true}, {AllowDrop: []string{"shop.User", "email"}}} {
		_, err := ts.Apply(map[string]string{"shop.proto": shopNoEmail}, opts)
		wantSchemaCode(t, err, codes.FailedPrecondition, "index shop.User.email", "index shop.User.email: would be dropped")
	}
	if s, err := ts.C.GetSchema(t.Context()); err != nil || s.GetFiles()["shop.proto"] != shopProto {
		t.Fatalf("schema after refusals: %v %v", s.GetFiles(), err)
	}
	resp, err := ts.Apply(map[string]string{"shop.proto": shopNoEmail}, client.SchemaOptions{AllowDrop: []string{"shop.User.email"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetPlan().GetIndexesDropped(); !resp.GetApplied() || len(d) != 1 || d[0].GetType() != "shop.User" || d[0].GetIndex() != "email" || !d[0].GetUnique() {
		t.Fatalf("plan %v", resp)
	}
	// Without the index, a second user with the same email is accepted.
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`), ts.Rec("shop.User", `{"id": 2, "email": "a@x"}`)})
}

func TestApplySchemaAddREST(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	c := restClients(t, ts)[0]
	var resp pb.ApplySchemaResponse
	c.mustPost("/v1/schema:apply", `{"files": {"inv.proto": `+jsonString(invProto)+`}, "mode": "SCHEMA_MODE_ADD"}`, &resp)
	if !resp.GetApplied() || !slices.Equal(resp.GetPlan().GetTypesAdded(), []string{"inv.Item"}) {
		t.Fatalf("REST add: %v", &resp)
	}
	if got := schemaFiles(t, ts); !slices.Equal(got, []string{"inv.proto", "shop.proto"}) {
		t.Fatalf("files after REST add: %v", got)
	}
	code, b := c.post("/v1/schema:apply", `{"files": {"shop.proto": `+jsonString(shopNoEmail)+`}, "mode": "SCHEMA_MODE_ADD"}`)
	st := c.restStatus(code, b, http.StatusBadRequest, codes.FailedPrecondition)
	if !strings.Contains(st.GetMessage(), "index shop.User.email: would be dropped") {
		t.Fatalf("REST refusal: %s", b)
	}
	c.mustPost("/v1/schema:apply", `{"mode": "SCHEMA_MODE_ADD", "removeFiles": ["inv.proto"], "allowDrop": ["inv.Item"]}`, &resp)
	if !resp.GetApplied() || !slices.Equal(resp.GetPlan().GetFilesRemoved(), []string{"inv.proto"}) {
		t.Fatalf("REST remove: %v", &resp)
	}
}

func TestApplySchemaAddNATS(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	for _, json := range []bool{false, true} {
		c := newNATSClient(t, ts, ts.Srv.NATSURL(), json)
		var resp pb.ApplySchemaResponse
		c.mustCall(natstransport.SubjectSchemaApply, &pb.ApplySchemaRequest{
			Files: map[string]string{"inv.proto": invProto}, Mode: pb.SchemaMode_SCHEMA_MODE_ADD,
		}, &resp)
		if !resp.GetApplied() || !slices.Equal(resp.GetPlan().GetTypesAdded(), []string{"inv.Item"}) {
			t.Fatalf("NATS add (json %v): %v", json, &resp)
		}
		if got := schemaFiles(t, ts); !slices.Equal(got, []string{"inv.proto", "shop.proto"}) {
			t.Fatalf("files after NATS add: %v", got)
		}
		st := c.call(natstransport.SubjectSchemaApply, &pb.ApplySchemaRequest{
			Files: map[string]string{"shop.proto": shopNoEmail}, Mode: pb.SchemaMode_SCHEMA_MODE_ADD, DryRun: true,
		}, &resp)
		wantNATSCode(t, st, codes.FailedPrecondition)
		if !strings.Contains(st.GetMessage(), "index shop.User.email: would be dropped") {
			t.Fatalf("NATS refusal: %v", st)
		}
		c.mustCall(natstransport.SubjectSchemaApply, &pb.ApplySchemaRequest{
			Mode: pb.SchemaMode_SCHEMA_MODE_ADD, RemoveFiles: []string{"inv.proto"}, AllowDrop: []string{"inv.Item"},
		}, &resp)
		if !resp.GetApplied() || !slices.Equal(resp.GetPlan().GetFilesRemoved(), []string{"inv.proto"}) {
			t.Fatalf("NATS remove: %v", &resp)
		}
	}
}
