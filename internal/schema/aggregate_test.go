package schema

import (
	"context"
	"slices"
	"strings"
	"testing"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
)

const aggMessage = `
enum Color { COLOR_UNSPECIFIED = 0; RED = 1; }
message Inner { string city = 1; int64 n = 2; }
message Row {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "team" name: "by_name" }
    %s
  };
  int64 id = 1;
  string team = 2;
  int64 score = 3;
  double ratio = 4;
  repeated string tags = 5;
  Inner inner = 6;
  Color color = 7;
  bool on = 8;
  optional uint32 hits = 9;
}
`

func aggFiles(decl string) map[string]string {
	return map[string]string{"rows.proto": record(strings.Replace(aggMessage, "%s", decl, 1))}
}

// TestAggregateIndexDeclared: an aggregate index compiles with its group
// and sum fields, survives an encode and decode with its state, and is
// described with them.
func TestAggregateIndexDeclared(t *testing.T) {
	ctx := context.Background()
	files := aggFiles(`aggregate: { name: "by_team" group_by: ["team", "inner.city"] sum: ["score", "ratio", "hits", "inner.n"] }
    aggregate: { name: "all" sum: "score" }`)
	res, err := Plan(ctx, Empty(), PlanRequest{Files: files}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := res.State.Types["shop.Row"]
	ix, ok := rt.Index("by_team")
	if !ok || !ix.Aggregate || !slices.Equal(keyPaths(ix.Fields), []string{"team", "inner.city"}) ||
		!slices.Equal(keyPaths(ix.Sums), []string{"score", "ratio", "hits", "inner.n"}) {
		t.Fatalf("by_team: %+v", ix)
	}
	enc, err := res.State.Encode()
	if err != nil {
		t.Fatal(err)
	}
	st, err := Decode(ctx, enc)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, d := range st.Describe() {
		for _, ix := range d.Indexes {
			if ix.Name == "by_team" {
				found = ix.Aggregate && ix.State == protobasev1.IndexState_INDEX_STATE_READY && slices.Equal(ix.Sum, []string{"score", "ratio", "hits", "inner.n"})
			}
		}
	}
	if !found {
		t.Fatalf("describe: %v", st.Describe())
	}
	// Summing another field is another index: planned as a drop and an add.
	res2, err := Plan(ctx, st, PlanRequest{Files: aggFiles(`aggregate: { name: "by_team" group_by: ["team", "inner.city"] sum: ["score"] }
    aggregate: { name: "all" sum: "score" }`)}, func(*RecordType) (uint64, error) { return 5, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(res2.BuildIndexes) != 1 || res2.BuildIndexes[0].Name != "by_team" || len(res2.DroppedIndexes) != 1 ||
		res2.BuildIndexes[0].State != protobasev1.IndexState_INDEX_STATE_BUILDING {
		t.Fatalf("changed sums: build %v drop %v", res2.BuildIndexes, res2.DroppedIndexes)
	}
}

// TestAggregateIndexRefused: each wrong declaration is refused naming the
// type, the index and the field.
func TestAggregateIndexRefused(t *testing.T) {
	for _, c := range []struct{ decl, want string }{
		{`aggregate: { group_by: "team" }`, `type shop.Row: aggregate index: name is required`},
		{`aggregate: { name: "by_name" group_by: "team" }`, `type shop.Row: index name "by_name" used twice`},
		{`aggregate: { name: "a" } aggregate: { name: "a" }`, `type shop.Row: index name "a" used twice`},
		{`aggregate: { name: "9a" }`, `aggregate index "9a": name must be letters`},
		{`aggregate: { name: "a" group_by: "tags" }`, `type shop.Row: aggregate index "a": group_by field "tags" is repeated`},
		{`aggregate: { name: "a" group_by: "inner" }`, `aggregate index "a": group_by field "inner": field "inner" is a message`},
		{`aggregate: { name: "a" group_by: "nope" }`, `aggregate index "a": group_by field "nope": no field "nope"`},
		{`aggregate: { name: "a" group_by: ["team", "team"] }`, `aggregate index "a": group_by field "team" listed twice`},
		{`aggregate: { name: "a" sum: "team" }`, `aggregate index "a": sum field "team" is a string; sum takes integers and floats`},
		{`aggregate: { name: "a" sum: "color" }`, `aggregate index "a": sum field "color" is a enum`},
		{`aggregate: { name: "a" sum: "on" }`, `aggregate index "a": sum field "on" is a bool`},
		{`aggregate: { name: "a" sum: "tags" }`, `aggregate index "a": sum field "tags" is repeated`},
		{`aggregate: { name: "a" sum: ["score", "score"] }`, `aggregate index "a": sum field "score" listed twice`},
	} {
		_, err := Compile(context.Background(), aggFiles(c.decl))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.decl, err, c.want)
		}
	}
}
