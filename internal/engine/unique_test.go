package engine_test

import (
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client/where"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/orderedcode"
)

// acctProto has a unique index on each kind of field that can be absent,
// and one on a proto3 scalar without presence.
const acctProto = `syntax = "proto3";
package acct;
import "protobase/v1/options.proto";

message Account {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true name: "by_email" }
    index: { fields: "handle" unique: true name: "by_handle" }
    index: { fields: "contact.phone" unique: true name: "by_phone" }
    index: { fields: "username" unique: true name: "by_username" }
    index: { fields: ["org", "nick"] unique: true name: "by_org_nick" }
  };
  int64 id = 1;
  optional string email = 2;
  string handle = 3;
  Contact contact = 4;
  oneof login {
    string username = 5;
    int64 badge = 6;
  }
  string org = 7;
  optional string nick = 8;
}

message Contact {
  string phone = 1;
}
`

// legacyProto is proto2: an optional field with a declared default.
const legacyProto = `syntax = "proto2";
package legacy;
import "protobase/v1/options.proto";

message Item {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "code" unique: true name: "by_code" } };
  optional int64 id = 1;
  optional int32 code = 2 [default = 7];
}
`

func acctEngine(t *testing.T) *testEngine {
	te := newEngine(t)
	te.Apply(map[string]string{"shop.proto": shopProto, "acct.proto": acctProto, "legacy.proto": legacyProto})
	return te
}

// A unique index leaves out records in which a field with presence is
// absent, so any number of records may lack it; a present value, the
// default included, is a value. A proto3 scalar without presence is never
// absent: its default is its value.
func TestUniqueAbsentValues(t *testing.T) {
	te := acctEngine(t)
	acct := func(js string) *anypb.Any { return te.Rec("acct.Account", js) }
	// Distinct handles: handle has no presence, so "" is a value.
	te.MustWrite(engine.OpInsert, []*anypb.Any{
		acct(`{"id": 1, "handle": "h1"}`),
		acct(`{"id": 2, "handle": "h2", "badge": 5}`),
		acct(`{"id": 3, "handle": "h3", "org": "o"}`),
	}, []*anypb.Any{
		acct(`{"id": 4, "handle": "h4", "org": "o", "badge": 6}`),
	})
	te.MustCheck()

	cases := []struct {
		name string
		rec  string
	}{
		{"optional present empty", `{"id": 10, "handle": "x1", "email": ""}`},
		{"handle without presence", `{"id": 10, "handle": ""}`},
		{"message present, field default", `{"id": 10, "handle": "x1", "contact": {}}`},
		{"oneof member set to its default", `{"id": 10, "handle": "x1", "username": ""}`},
		{"composite, every part present", `{"id": 10, "handle": "x1", "org": "o", "nick": ""}`},
	}
	// Each present value is taken once by a first record, then collides.
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first := acct(c.rec)
			te.MustWrite(engine.OpInsert, []*anypb.Any{first})
			dup := te.Rec("acct.Account", c.rec)
			dup.Value = append(dup.Value, te.Rec("acct.Account", `{"id": 11, "handle": "y1"}`).Value...)
			if c.name == "handle without presence" {
				dup = te.Rec("acct.Account", `{"id": 11}`)
			}
			wantWriteError(t, te.Write(engine.OpInsert, []*anypb.Any{dup}), apierror.AlreadyExists, 0, 0)
			te.MustWrite(engine.OpRemove, []*anypb.Any{first})
			te.MustCheck()
		})
	}

	// Absent values leave the value free: a record sets it, another takes
	// it once the first lets go of it by an update that drops the field.
	te.MustWrite(engine.OpUpsert, []*anypb.Any{acct(`{"id": 1, "handle": "h1", "email": "a@x", "contact": {"phone": "1"}, "username": "u", "nick": "n"}`)})
	taken := acct(`{"id": 2, "handle": "h2", "email": "a@x"}`)
	wantWriteError(t, te.Write(engine.OpUpdate, []*anypb.Any{taken}), apierror.AlreadyExists, 0, 0)
	te.MustWrite(engine.OpUpdate, []*anypb.Any{acct(`{"id": 1, "handle": "h1"}`)}, []*anypb.Any{taken})
	te.MustCheck()

	// The proto2 default: absent reads as 7 but is not entered; 7 set is.
	item := func(js string) *anypb.Any { return te.Rec("legacy.Item", js) }
	te.MustWrite(engine.OpInsert, []*anypb.Any{item(`{"id": 1}`), item(`{"id": 2}`), item(`{"id": 3, "code": 7}`)})
	wantWriteError(t, te.Write(engine.OpInsert, []*anypb.Any{item(`{"id": 4, "code": 7}`)}), apierror.AlreadyExists, 0, 0)
	r := te.MustCheck()
	if r.Problems != nil {
		t.Fatal(r.Problems)
	}
}

// A unique index built over existing records leaves out the absent ones
// instead of failing on them, and the checker agrees with the writer.
func TestUniqueAbsentBuild(t *testing.T) {
	te := newEngine(t)
	noIndex := `syntax = "proto2";
package legacy;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = { primary_key: "id" };
  optional int64 id = 1;
  optional int32 code = 2 [default = 7];
}
`
	te.Apply(map[string]string{"shop.proto": shopProto, "legacy.proto": noIndex})
	var recs []*anypb.Any
	for i := range 2500 { // more than one build step
		js := `{"id": ` + itoa(i) + `}`
		if i%2 == 0 {
			js = `{"id": ` + itoa(i) + `, "code": ` + itoa(i) + `}`
		}
		recs = append(recs, te.Rec("legacy.Item", js))
	}
	te.MustWrite(engine.OpInsert, recs)
	te.Apply(map[string]string{"shop.proto": shopProto, "legacy.proto": legacyProto})
	if ix := waitIndexNamed(t, te, "by_code"); ix.State != pb.IndexState_INDEX_STATE_READY {
		t.Fatalf("index %v, want READY", ix)
	}
	if r := te.MustCheck(); r.Entries != 1250 {
		t.Fatalf("check read %d entries, want 1250 (the records that set code)", r.Entries)
	}
}

// Queries whose matches may lack a field of a unique index are not served
// by that index; the others are.
func TestUniqueAbsentQueries(t *testing.T) {
	te := acctEngine(t)
	acct := func(js string) *anypb.Any { return te.Rec("acct.Account", js) }
	te.MustWrite(engine.OpInsert, []*anypb.Any{
		acct(`{"id": 1, "handle": "h1"}`),
		acct(`{"id": 2, "handle": "h2", "email": ""}`),
		acct(`{"id": 3, "handle": "h3", "email": "b@x", "contact": {"phone": "1"}, "username": "u"}`),
		acct(`{"id": 4, "handle": "h4", "email": "c@x", "contact": {}}`),
	})
	item := func(js string) *anypb.Any { return te.Rec("legacy.Item", js) }
	te.MustWrite(engine.OpInsert, []*anypb.Any{item(`{"id": 1}`), item(`{"id": 2, "code": 7}`), item(`{"id": 3, "code": 8}`)})

	cases := []struct {
		typ, where string
		order      *pb.Order
		want       int
		index      bool // served by the unique index
	}{
		{"acct.Account", `email = ""`, nil, 2, false}, // record 1 reads "" too
		{"acct.Account", `email <= "b@x"`, nil, 3, false},
		{"acct.Account", `email = "b@x"`, nil, 1, true},
		{"acct.Account", `email in ("b@x", "c@x")`, nil, 2, true},
		{"acct.Account", `email > ""`, &pb.Order{Index: "by_email"}, 2, true},
		{"acct.Account", `email = "c@x" or email = "b@x"`, nil, 2, true},
		{"acct.Account", `email = "c@x" or email = ""`, nil, 3, false},
		{"acct.Account", `handle = "h1"`, nil, 1, true}, // no presence: always indexed
		{"acct.Account", `contact.phone = "1"`, nil, 1, true},
		{"acct.Account", `contact.phone = ""`, nil, 3, false}, // 4 holds "", 1 and 2 lack contact
		{"acct.Account", `username = "u"`, nil, 1, true},
		{"acct.Account", `username = ""`, nil, 3, false},
		{"legacy.Item", `code = 7`, nil, 2, false},
		{"legacy.Item", `code = 8`, nil, 1, true},
	}
	for _, c := range cases {
		q := &pb.Query{Type: c.typ, Where: mustWhere(t, c.where), Order: c.order, Explain: true}
		resp, err := query(te.E, t.Context(), &pb.QueryRequest{Query: q})
		if err != nil {
			t.Fatalf("%s: %v", c.where, err)
		}
		if len(resp.Records) != c.want || (resp.Plan.Access == "index_range") != c.index {
			t.Errorf("%s: %d records by %s, want %d (index %v)", c.where, len(resp.Records), resp.Plan.Text, c.want, c.index)
		}
	}
	// Ordered by the index with nothing that excludes absent emails: the
	// listing would silently leave records out, so it is refused.
	_, err := query(te.E, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "acct.Account", Order: &pb.Order{Index: "by_email"}}})
	var e *apierror.Error
	if !errors.As(err, &e) || e.Code != apierror.InvalidArgument {
		t.Fatalf("order by a unique index over absent values: %v, want INVALID_ARGUMENT", err)
	}
}

func mustWhere(t *testing.T, s string) *pb.Expr {
	t.Helper()
	e, err := where.Parse(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return e
}

// The checker expects no entry for a record lacking a field of a unique
// index, and flags one.
func TestUniqueAbsentCheck(t *testing.T) {
	te := acctEngine(t)
	te.MustWrite(engine.OpInsert, []*anypb.Any{
		te.Rec("acct.Account", `{"id": 1, "handle": "h1", "email": "a@x"}`),
		te.Rec("acct.Account", `{"id": 2, "handle": "h2"}`),
	})
	te.MustCheck()
	entry, _ := te.firstKey([]byte{0x02}, "a@x")
	// An entry for record 2, which has no email.
	te.raw(map[string][]byte{string(orderedcode.AppendBytes(slices.Clone(entry[:5]), nil)): orderedcode.AppendInt(nil, 2)})
	r, err := engine.Check(t.Context(), te.St)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 1 || r.Problems[0].Kind != engine.ProblemStaleEntry || r.Problems[0].Index != "by_email" {
		t.Fatalf("check found %v, want one stale entry of by_email", r.Problems)
	}
}
