package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

func jsonKeys(t *testing.T, vs ...any) []*structpb.Value {
	t.Helper()
	out := make([]*structpb.Value, len(vs))
	for i, v := range vs {
		sv, err := structpb.NewValue(v)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = sv
	}
	return out
}

// Get reads many keys, given as JSON values or key records, and answers
// the records found in key order and the others by position and as
// given, on gRPC, REST and NATS.
func TestGetRecords(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	ts.MustWrite(insert, []*anypb.Any{
		ts.Rec("shop.User", `{"id": 1, "name": "ann", "email": "a"}`),
		ts.Rec("shop.User", `{"id": 2, "name": "bob", "email": "b"}`),
		ts.Rec("shop.User", `{"id": "9007199254740993", "name": "big", "email": "c"}`),
		ts.Rec("shop.Order", `{"userId": 1, "id": "18446744073709551615", "total": 2.5}`),
	})
	ctx := context.Background()
	req := &pb.GetRequest{
		Type: "shop.User",
		Keys: jsonKeys(t, 2, 3, "9007199254740993", map[string]any{"id": 1}, []any{2}),
		KeyRecords: []*anypb.Any{
			ts.Rec("shop.User", `{"id": 1, "name": "ignored"}`),
			ts.Rec("shop.User", `{"id": 4}`),
		},
	}
	check := func(call string, resp *pb.GetResponse) {
		t.Helper()
		var names []string
		for _, r := range resp.GetRecords() {
			m := dynamicpb.NewMessage(ts.Desc("shop.User"))
			if err := proto.Unmarshal(r.Value, m); err != nil || r.TypeUrl != "type.googleapis.com/shop.User" {
				t.Fatalf("%s: record %v: %v", call, r, err)
			}
			names = append(names, servertest.FieldValue(m, "name").String())
		}
		if want := []string{"bob", "big", "ann", "bob", "ann"}; !slices.Equal(names, want) || !slices.Equal(resp.GetMissing(), []uint32{1, 6}) {
			t.Fatalf("%s: records %q missing %v, want %q missing [1 6]", call, names, resp.GetMissing(), want)
		}
		// The missing keys come back as the request gave them.
		mk, mr := resp.GetMissingKeys(), resp.GetMissingKeyRecords()
		if len(mk) != 1 || mk[0].GetNumberValue() != 3 || len(mr) != 1 {
			t.Fatalf("%s: missing keys %v, key records %v; want [3] and the record of id 4", call, mk, mr)
		}
		m := dynamicpb.NewMessage(ts.Desc("shop.User"))
		if err := proto.Unmarshal(mr[0].GetValue(), m); err != nil || servertest.FieldValue(m, "id").Int() != 4 {
			t.Fatalf("%s: missing key record %v: %v", call, m, err)
		}
	}
	resp, err := ts.C.API().Get(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	check("grpc", resp)
	for _, js := range []bool{false, true} {
		var nr pb.GetResponse
		newNATSClient(t, ts, ts.Srv.NATSURL(), js).mustCall(natstransport.SubjectGetRecords, req, &nr)
		check(fmt.Sprintf("nats (json %v)", js), &nr)
	}
	for _, c := range restClients(t, ts) {
		var rr pb.GetResponse
		c.mustPost("/v1/records:get", `{"type": "shop.User", "keys": [2, 3, "9007199254740993", {"id": 1}, [2]],
			"keyRecords": [{"@type": "type.googleapis.com/shop.User", "id": "1"}, {"@type": "type.googleapis.com/shop.User", "id": "4"}]}`, &rr)
		check("rest "+c.name(), &rr)
	}

	// A compound key as a list in primary_key order, or as an object.
	resp, err = ts.C.API().Get(ctx, &pb.GetRequest{Type: "shop.Order",
		Keys: jsonKeys(t, []any{1, "18446744073709551615"}, map[string]any{"user_id": 1, "id": "18446744073709551615"}, []any{2, 1})})
	if err != nil || len(resp.Records) != 2 || !slices.Equal(resp.Missing, []uint32{2}) {
		t.Fatalf("compound keys: %v %v", resp, err)
	}
	resp, err = ts.C.API().Get(ctx, &pb.GetRequest{Type: "shop.User"})
	if err != nil || len(resp.Records) != 0 || len(resp.Missing) != 0 {
		t.Fatalf("no keys: %v %v", resp, err)
	}
}

// Malformed keys and requests are refused with a message that names the
// key and what is wrong; nothing is read.
func TestGetRecordsErrors(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, MaxRecordsPerBatch: 3})
	ctx := context.Background()
	cases := []struct {
		name string
		req  *pb.GetRequest
		code codes.Code
		want string
	}{
		{"no type", &pb.GetRequest{Keys: jsonKeys(t, 1)}, codes.InvalidArgument, "type is missing"},
		{"unknown type", &pb.GetRequest{Type: "shop.Nope", Keys: jsonKeys(t, 1)}, codes.NotFound, `"shop.Nope"`},
		{"type URL", &pb.GetRequest{Type: "x/shop.User", Keys: jsonKeys(t, 1)}, codes.NotFound, "no record type"},
		{"fraction", &pb.GetRequest{Type: "shop.User", Keys: jsonKeys(t, 1, 7.5)}, codes.InvalidArgument, "keys[1]:"},
		{"null", &pb.GetRequest{Type: "shop.User", Keys: jsonKeys(t, nil)}, codes.InvalidArgument, "keys[0]: the key is null"},
		{"missing value", &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{{}}}, codes.InvalidArgument, "keys[0]:"},
		{"not a number", &pb.GetRequest{Type: "shop.User", Keys: jsonKeys(t, "seven")}, codes.InvalidArgument, "keys[0]:"},
		{"overflow", &pb.GetRequest{Type: "shop.User", Keys: jsonKeys(t, "9223372036854775808")}, codes.InvalidArgument, "keys[0]:"},
		{"non-key field", &pb.GetRequest{Type: "shop.User", Keys: jsonKeys(t, map[string]any{"name": "ann"})}, codes.InvalidArgument, `"name" is not a primary-key field`},
		{"short list", &pb.GetRequest{Type: "shop.Order", Keys: jsonKeys(t, []any{1})}, codes.InvalidArgument, "has 2 fields (user_id, id)"},
		{"scalar for compound", &pb.GetRequest{Type: "shop.Order", Keys: jsonKeys(t, 1)}, codes.InvalidArgument, "give a list or an object"},
		{"partial object", &pb.GetRequest{Type: "shop.Order", Keys: jsonKeys(t, map[string]any{"id": 1})}, codes.InvalidArgument, "needs every primary-key field"},
		{"nested value", &pb.GetRequest{Type: "shop.User", Keys: jsonKeys(t, []any{[]any{1}})}, codes.InvalidArgument, "want a number, string or bool"},
		{"too many", &pb.GetRequest{Type: "shop.User", Keys: jsonKeys(t, 1, 2, 3, 4)}, codes.InvalidArgument, "4 keys in one request"},
		{"record of another type", &pb.GetRequest{Type: "shop.User", KeyRecords: []*anypb.Any{ts.Rec("shop.Order", `{"id": 1}`)}}, codes.InvalidArgument, "key_records[0]: type URL"},
		{"truncated record", &pb.GetRequest{Type: "shop.User", KeyRecords: []*anypb.Any{{TypeUrl: "type.googleapis.com/shop.User", Value: []byte{0x08}}}}, codes.InvalidArgument, "key_records[0]:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ts.C.API().Get(ctx, tc.req)
			if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v, want %v with %q", err, tc.code, tc.want)
			}
		})
	}
	c := restClients(t, ts)[0]
	for _, body := range []string{`{"type": "shop.User", "keys": [{"id": {"x": 1}}]}`, `{"type": "shop.User", "keys": 1}`, `{"type": "shop.User", "keyRecords": [{"id": 1}]}`, `not json`} {
		code, b := c.post("/v1/records:get", body)
		c.restStatus(code, b, http.StatusBadRequest, codes.InvalidArgument)
	}
	wantNATSCode(t, newNATSClient(t, ts, ts.Srv.NATSURL(), false).call(natstransport.SubjectGetRecords,
		&pb.GetRequest{Type: "shop.User", Keys: jsonKeys(t, "x")}, new(pb.GetResponse)), codes.InvalidArgument)
}

// Client.Get of one key at a time, as an application reading one record
// per call does: a number, a string longer than most keys, a compound key,
// a key with no record, and with versions.
func TestGetOneKey(t *testing.T) {
	ts := startServer(t, server.Config{NoSync: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto, "kv.proto": `syntax = "proto3";
package kv;
import "protobase/v1/options.proto";
message Entry {
  option (protobase.v1.record) = { primary_key: "key" };
  string key = 1;
  string value = 2;
}
`})
	long := strings.Repeat("k", 100)
	ts.MustWrite(insert, []*anypb.Any{
		ts.Rec("shop.User", `{"id": 7, "name": "ann", "email": "a"}`),
		ts.Rec("kv.Entry", `{"key": "`+long+`", "value": "v"}`),
		ts.Rec("shop.Order", `{"userId": 7, "id": "3", "total": 2.5}`),
	})
	ctx := context.Background()
	for _, tc := range []struct {
		typ   string
		key   any
		found bool
	}{
		{"shop.User", 7, true},
		{"shop.User", int64(8), false},
		{"kv.Entry", long, true},
		{"kv.Entry", long[1:], false},
		{"shop.Order", []any{7, "3"}, true},
	} {
		recs, vers, err := ts.C.GetVersioned(ctx, tc.typ, tc.key)
		if err != nil || len(recs) != 1 || (recs[0] != nil) != tc.found || (vers[0] != 0) != tc.found {
			t.Fatalf("%s %v: records %v versions %v, %v; want found %v", tc.typ, tc.key, recs, vers, err, tc.found)
		}
		if recs, err = ts.C.Get(ctx, tc.typ, tc.key); err != nil || (recs[0] != nil) != tc.found {
			t.Fatalf("%s %v: records %v, %v; want found %v", tc.typ, tc.key, recs, err, tc.found)
		}
		if tc.found && recs[0].TypeUrl != "type.googleapis.com/"+tc.typ {
			t.Fatalf("%s %v: record of type %s", tc.typ, tc.key, recs[0].TypeUrl)
		}
	}
}
