package schema

import (
	"context"
	"errors"
	"strings"
	"testing"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
)

// ttlType compiles a record type User with the given ttl option and fields.
func ttlType(ttl, fields string) (*RecordType, error) {
	body := "message Other { int64 x = 1; }\nmessage User {\n  option (protobase.v1.record) = { primary_key: \"id\" " + ttl + " };\n  int64 id = 1;\n" + fields + "}\n"
	c, err := Compile(context.Background(), map[string]string{"users.proto": record(body, "google/protobuf/timestamp.proto")})
	if err != nil {
		return nil, err
	}
	return c.Types["shop.User"], nil
}

func TestTTLOption(t *testing.T) {
	for _, tt := range []struct {
		ttl, fields string
		unit        protobasev1.TTLUnit
		timestamp   bool
	}{
		{`ttl: { field: "expires_at" }`, "  google.protobuf.Timestamp expires_at = 2;\n", 0, true},
		{`ttl: { field: "exp" unit: TTL_UNIT_SECONDS }`, "  int64 exp = 2;\n", protobasev1.TTLUnit_TTL_UNIT_SECONDS, false},
		{`ttl: { field: "exp" unit: TTL_UNIT_MILLISECONDS }`, "  uint64 exp = 2;\n", protobasev1.TTLUnit_TTL_UNIT_MILLISECONDS, false},
		{`ttl: { field: "exp" unit: TTL_UNIT_SECONDS }`, "  optional sfixed32 exp = 2;\n", protobasev1.TTLUnit_TTL_UNIT_SECONDS, false},
	} {
		rt, err := ttlType(tt.ttl, tt.fields)
		if err != nil {
			t.Fatalf("%s: %v", tt.ttl, err)
		}
		if rt.TTL == nil || rt.TTL.Unit != tt.unit || rt.TTL.Timestamp() != tt.timestamp {
			t.Fatalf("%s: TTL = %+v", tt.ttl, rt.TTL)
		}
	}
	rt, err := ttlType("", "")
	if err != nil || rt.TTL != nil {
		t.Fatalf("no ttl option: TTL = %+v, %v", rt, err)
	}
}

func TestTTLOptionErrors(t *testing.T) {
	for _, tt := range []struct {
		ttl, fields, want string
	}{
		{`ttl: {}`, "", `type shop.User: ttl: field is required`},
		{`ttl: { field: "nope" }`, "", `type shop.User: ttl: field "nope": message shop.User has no such field`},
		{`ttl: { field: "o.x" unit: TTL_UNIT_SECONDS }`, "  Other o = 2;\n", `type shop.User: ttl: field "o.x": must be a field of shop.User itself, not a path`},
		{`ttl: { field: "exp" }`, "  string exp = 2;\n", `type shop.User: ttl: field "exp" is a string; it must be a google.protobuf.Timestamp or an integer`},
		{`ttl: { field: "exp" unit: TTL_UNIT_SECONDS }`, "  double exp = 2;\n", `type shop.User: ttl: field "exp" is a double; it must be a google.protobuf.Timestamp or an integer`},
		{`ttl: { field: "exp" unit: TTL_UNIT_SECONDS }`, "  bool exp = 2;\n", `type shop.User: ttl: field "exp" is a bool`},
		{`ttl: { field: "exp" }`, "  Other exp = 2;\n", `type shop.User: ttl: field "exp" is a shop.Other; it must be a google.protobuf.Timestamp or an integer`},
		{`ttl: { field: "exp" }`, "  repeated google.protobuf.Timestamp exp = 2;\n", `type shop.User: ttl: field "exp" is repeated; an expiry is one time`},
		{`ttl: { field: "exp" unit: TTL_UNIT_SECONDS }`, "  repeated int64 exp = 2;\n", `type shop.User: ttl: field "exp" is repeated`},
		{`ttl: { field: "exp" unit: TTL_UNIT_SECONDS }`, "  map<string, int64> exp = 2;\n", `type shop.User: ttl: field "exp" is repeated`},
		{`ttl: { field: "exp" }`, "  int64 exp = 2;\n", `type shop.User: ttl: field "exp" is an integer: unit is required (TTL_UNIT_SECONDS or TTL_UNIT_MILLISECONDS)`},
		{`ttl: { field: "exp" unit: TTL_UNIT_MILLISECONDS }`, "  google.protobuf.Timestamp exp = 2;\n", `type shop.User: ttl: field "exp" is a google.protobuf.Timestamp, which carries its own unit; remove unit TTL_UNIT_MILLISECONDS`},
		{`ttl: { field: "exp" unit: 7 }`, "  int64 exp = 2;\n", `type shop.User: ttl: field "exp": unknown unit 7`},
	} {
		_, err := ttlType(tt.ttl, tt.fields)
		var ce *CompileError
		if !errors.As(err, &ce) || len(ce.Errors) != 1 || !strings.Contains(ce.Errors[0], tt.want) {
			t.Errorf("%s with %q: err = %v, want one error containing %q", tt.ttl, tt.fields, err, tt.want)
		}
	}
}

// TestTTLOptionAdded: adding a ttl option to a type with data is planned
// as a change of the files alone, and the new state's type has the TTL,
// as has the state decoded from its encoding.
func TestTTLOptionAdded(t *testing.T) {
	ctx := context.Background()
	old, err := Plan(ctx, Empty(), PlanRequest{Files: baseUser()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Plan(ctx, old.State, PlanRequest{Files: userFile(`primary_key: "id" ttl: { field: "id" unit: TTL_UNIT_SECONDS }`, baseFields, baseAddress)},
		func(*RecordType) (uint64, error) { return 10, nil })
	if err != nil {
		t.Fatal(err)
	}
	if ttl := r.State.Types["shop.User"].TTL; ttl == nil || ttl.Field.Name() != "id" {
		t.Fatalf("TTL after the plan = %+v; plan %v", ttl, r.Plan)
	}
	b, err := r.State.Encode()
	if err != nil {
		t.Fatal(err)
	}
	st, err := Decode(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if ttl := st.Types["shop.User"].TTL; ttl == nil || ttl.Unit != protobasev1.TTLUnit_TTL_UNIT_SECONDS {
		t.Fatalf("TTL of the decoded state = %+v", ttl)
	}
}
