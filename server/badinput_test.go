package server_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// Each bad record is refused with INVALID_ARGUMENT naming the record and,
// where one is to blame, the field; the store is left as it was.
func TestBadRecordBytes(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
	valid := ts.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "b@x", "tags": ["t"]}`).Value

	user := "type.googleapis.com/shop.User"
	cases := []struct {
		name   string
		any    *anypb.Any
		field  string
		reason string
	}{
		{"truncated", &anypb.Any{TypeUrl: user, Value: valid[:len(valid)-1]}, "tags", "truncated"},
		{"truncated tag", &anypb.Any{TypeUrl: user, Value: []byte{0x80}}, "", "truncated"},
		{"wrong wire type", &anypb.Any{TypeUrl: user, Value: protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 5)}, "name", "wire type"},
		{"invalid UTF-8", &anypb.Any{TypeUrl: user, Value: []byte{0x1a, 0x01, 0xc3}}, "email", "UTF-8"},
		{"unknown field", &anypb.Any{TypeUrl: user, Value: protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)}, "", "unknown field"},
		{"unknown type URL", &anypb.Any{TypeUrl: "type.googleapis.com/shop.Nope", Value: valid}, "", "unknown type"},
		{"empty type URL", &anypb.Any{Value: valid}, "", "unknown type"},
		{"nested wrong wire type", &anypb.Any{TypeUrl: "type.googleapis.com/shop.Order",
			Value: protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), protowire.AppendFixed32(protowire.AppendTag(nil, 2, protowire.Fixed32Type), 1))}, "line.qty", "wire type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			good := ts.Rec("shop.User", `{"id": 3, "email": "c@x"}`)
			_, err := ts.Write(insert, []*anypb.Any{good, tc.any})
			we := servertest.WriteErr(t, err, codes.InvalidArgument)
			if we.Record != 1 || we.Field != tc.field || !strings.Contains(we.Reason, tc.reason) {
				t.Fatalf("detail %v, want record 1 field %q reason ~%q", we, tc.field, tc.reason)
			}
		})
	}
	if n := ts.Count("shop.User"); n != 1 {
		t.Fatalf("bad batches changed data: %d users", n)
	}
}

func TestOversizedMessage(t *testing.T) {
	ts := startServer(t, server.Config{MaxMessageBytes: 64 << 10})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	big := ts.Rec("shop.User", `{"id": 1, "name": "`+strings.Repeat("x", 100<<10)+`"}`)
	_, err := ts.Write(insert, []*anypb.Any{big})
	wantCode(t, err, codes.ResourceExhausted)
	if n := ts.Count("shop.User"); n != 0 {
		t.Fatalf("oversized write stored %d", n)
	}
	// The server is still fine.
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1}`)})
}

func TestTooManyRecordsInBatch(t *testing.T) {
	ts := startServer(t, server.Config{MaxRecordsPerBatch: 10})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	var recs []*anypb.Any
	for i := 0; i < 11; i++ {
		recs = append(recs, ts.Rec("shop.User", `{"id": `+itoa(i)+`, "email": "`+itoa(i)+`"}`))
	}
	_, err := ts.Write(insert, recs)
	servertest.WriteErr(t, err, codes.ResourceExhausted)
}

func TestBadSchemas(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1}`)})
	before, _ := ts.C.GetSchema(t.Context())

	cases := []struct {
		name     string
		files    map[string]string
		code     codes.Code
		contains []string
	}{
		{"syntax error", map[string]string{"shop.proto": shopProto, "bad.proto": "syntax = \"proto3\";\nmessage X {\n  int32 a = ;\n}\n"},
			codes.InvalidArgument, []string{"bad.proto:3:"}},
		{"unresolved import", map[string]string{"shop.proto": shopProto, "imp.proto": "syntax = \"proto3\";\nimport \"missing/thing.proto\";\n"},
			codes.InvalidArgument, []string{"imp.proto", "missing/thing.proto"}},
		{"record option names a missing field", map[string]string{"shop.proto": strings.Replace(shopProto, `index: { fields: "name" }`, `index: { fields: "nam" }`, 1)},
			codes.InvalidArgument, []string{"shop.proto:", "shop.User", "nam"}},
		{"primary key on a repeated field", map[string]string{"shop.proto": strings.Replace(shopProto, `primary_key: "id"`, `primary_key: "tags"`, 1)},
			codes.InvalidArgument, []string{"tags"}},
		{"empty file name map", map[string]string{"": "syntax = \"proto3\";"}, codes.InvalidArgument, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ts.Apply(tc.files, client.SchemaOptions{})
			wantCode(t, err, tc.code, tc.contains...)
		})
	}
	after, _ := ts.C.GetSchema(t.Context())
	if after.Version != before.Version || ts.Count("shop.User") != 1 {
		t.Fatal("a refused schema changed the state")
	}
}
