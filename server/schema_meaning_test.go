package server_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server"
)

const rankProto = `syntax = "proto2";
package rank;
import "protobase/v1/options.proto";

message Player {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { name: "by_score" fields: "score" }
    index: { name: "by_email" fields: "email" unique: true }
    index: { name: "by_level" fields: "level" }
  };
  optional int64 id = 1;
  optional int32 score = 2;
  optional string email = 3;
  optional Level level = 4;
  optional string note = 5;
  optional string nick = 6;
}

enum Level { LOW = 1; HIGH = 2; }
`

// TestApplySchemaRefusesNewMeaningOfStoredKeys changes, on a proto2 type
// holding records, how absent key and indexed fields decode: each change is
// refused naming the type and the field, nothing changes, and a change of
// the same kind to a field in no key is applied and listed in the plan.
func TestApplySchemaRefusesNewMeaningOfStoredKeys(t *testing.T) {
	ts := startServer(t, server.Config{})
	v1 := ts.MustApply(map[string]string{"rank.proto": rankProto})
	ts.MustWrite(insert, []*anypb.Any{
		ts.Rec("rank.Player", `{"id": "1", "score": 7, "email": "a@x", "level": "HIGH"}`),
		ts.Rec("rank.Player", `{"id": "2", "email": "b@x"}`),
		ts.Rec("rank.Player", `{"id": "3", "email": "c@x"}`),
		ts.Rec("rank.Player", `{"email": "d@x"}`),
	})

	refused := []struct {
		name, from, to, field string
	}{
		{"default on an indexed field", "optional int32 score = 2;", "optional int32 score = 2 [default = 7];", "score"},
		{"default on the primary key", "optional int64 id = 1;", "optional int64 id = 1 [default = 5];", "id"},
		{"default on a unique indexed field", "optional string email = 3;", `optional string email = 3 [default = "none"];`, "email"},
		{"enum reordered", "enum Level { LOW = 1; HIGH = 2; }", "enum Level { HIGH = 2; LOW = 1; }", "level"},
		{"indexed field moved into a oneof", "optional int32 score = 2;", "oneof rank { int32 score = 2; }", "score"},
	}
	for _, tt := range refused {
		files := map[string]string{"rank.proto": strings.Replace(rankProto, tt.from, tt.to, 1)}
		for _, dry := range []bool{true, false} {
			_, err := ts.Apply(files, client.SchemaOptions{DryRun: dry})
			wantCode(t, err, codes.FailedPrecondition, "rank.Player", "field "+tt.field+" ")
		}
	}
	if v := ts.MustApply(map[string]string{"rank.proto": rankProto}); v.Applied || v.Version != v1.Version {
		t.Fatalf("a refused change was applied: %v", v)
	}

	// The same kinds of change to fields in no key are applied and listed.
	accepted := strings.Replace(rankProto, "optional string note = 5;\n  optional string nick = 6;",
		"optional string note = 5 [default = \"n/a\"];\n  oneof alias { string nick = 6; }", 1)
	resp := ts.MustApply(map[string]string{"rank.proto": accepted})
	if !resp.Applied || len(resp.Plan.TypesChanged) != 1 {
		t.Fatalf("accepted change: %v", resp)
	}
	got := strings.Join(resp.Plan.TypesChanged[0].Changes, "\n")
	for _, want := range []string{`field note (5) default changed from "" to "n/a"`, "field nick (6) moved into oneof alias"} {
		if !strings.Contains(got, want) {
			t.Errorf("types_changed %q lacks %q", got, want)
		}
	}
	if n := ts.Count("rank.Player"); n != 4 {
		t.Fatalf("%d records after the changes, want 4", n)
	}
}
