package server_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

func wantCode(t *testing.T, err error, code codes.Code, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %v, got OK", code)
	}
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("want %v, got %v: %s", code, st.Code(), st.Message())
	}
	for _, c := range contains {
		if !strings.Contains(st.Message(), c) {
			t.Fatalf("message %q does not mention %q", st.Message(), c)
		}
	}
}

func TestSchemaEvolution(t *testing.T) {
	ts := startServer(t, server.Config{})
	v1 := ts.MustApply(map[string]string{"shop.proto": shopProto})
	if !v1.Applied || len(v1.Plan.TypesAdded) != 2 {
		t.Fatalf("first apply: %v", v1)
	}
	// Applying the same state again changes nothing.
	again := ts.MustApply(map[string]string{"shop.proto": shopProto})
	if again.Applied || again.Version != v1.Version {
		t.Fatalf("no-op apply: %v", again)
	}
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "a@x"}`)})

	// Adding a field is fine.
	added := strings.Replace(shopProto, "repeated string tags = 4;", "repeated string tags = 4;\n  int32 age = 5;", 1)
	resp := ts.MustApply(map[string]string{"shop.proto": added})
	if !resp.Applied || len(resp.Plan.TypesChanged) != 1 {
		t.Fatalf("add field: %v", resp)
	}
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "age": 30, "email": "b@x"}`)})

	// Changing a field's type once data exists is refused, and changes nothing.
	changed := strings.Replace(added, "int32 age = 5;", "string age = 5;", 1)
	_, err := ts.Apply(map[string]string{"shop.proto": changed}, client.SchemaOptions{})
	wantCode(t, err, codes.FailedPrecondition, "shop.User", "age")
	// Renumbering is refused too.
	renumbered := strings.Replace(added, "string name = 2;", "string name = 6;", 1)
	_, err = ts.Apply(map[string]string{"shop.proto": renumbered}, client.SchemaOptions{})
	wantCode(t, err, codes.FailedPrecondition, "name")

	// Dropping a type needs allow_drop.
	withoutOrder, _, _ := strings.Cut(added, "message Order")
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.Order", `{"userId": 1, "id": 1}`)})
	_, err = ts.Apply(map[string]string{"shop.proto": withoutOrder}, client.SchemaOptions{})
	wantCode(t, err, codes.FailedPrecondition, "shop.Order")
	if ts.Count("shop.Order") != 1 {
		t.Fatal("refused drop deleted data")
	}

	// A dry run reports the drop and its record count and changes nothing.
	dry, err := ts.Apply(map[string]string{"shop.proto": withoutOrder}, client.SchemaOptions{DryRun: true, AllowDrop: []string{"shop.Order"}})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Applied || len(dry.Plan.TypesDropped) != 1 || dry.Plan.TypesDropped[0].Records != 1 {
		t.Fatalf("dry run plan %v", dry)
	}
	if ts.Count("shop.Order") != 1 {
		t.Fatal("dry run deleted data")
	}

	// With allow_drop the type and its data go; re-adding it starts empty.
	if _, err := ts.Apply(map[string]string{"shop.proto": withoutOrder}, client.SchemaOptions{AllowDrop: []string{"shop.Order"}}); err != nil {
		t.Fatal(err)
	}
	_, err = ts.Write(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 9, "email": "z@x"}`), {TypeUrl: "type.googleapis.com/shop.Order"}})
	if we := servertest.WriteErr(t, err, codes.InvalidArgument); we.Record != 1 || !strings.Contains(we.Reason, "unknown type") {
		t.Fatalf("detail %v", we)
	}
	ts.MustApply(map[string]string{"shop.proto": added})
	if n := ts.Count("shop.Order"); n != 0 {
		t.Fatalf("re-added type has %d records", n)
	}
}

func TestSchemaChangesWithoutDataAreFree(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	changed := strings.Replace(shopProto, "double total = 3;", "string total = 3;", 1)
	if _, err := ts.Apply(map[string]string{"shop.proto": changed}, client.SchemaOptions{}); err != nil {
		t.Fatalf("change of an empty type refused: %v", err)
	}
}

func TestIndexBuiltInBackground(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	var batch []*anypb.Any
	for i := 0; i < 2500; i++ {
		batch = append(batch, ts.Rec("shop.Order", `{"userId": 1, "id": `+itoa(i)+`, "line": {"sku": "s`+itoa(i)+`"}}`))
	}
	ts.MustWrite(insert, batch)

	// A unique index over distinct values builds and becomes READY.
	withIdx := strings.Replace(shopProto, `option (protobase.v1.record) = { primary_key: ["user_id", "id"] };`,
		`option (protobase.v1.record) = { primary_key: ["user_id", "id"] index: { fields: "line.sku" unique: true } };`, 1)
	resp := ts.MustApply(map[string]string{"shop.proto": withIdx})
	if len(resp.Plan.IndexesAdded) != 1 || !resp.Plan.IndexesAdded[0].BuildRequired {
		t.Fatalf("plan %v", resp.Plan)
	}
	waitIndex(t, ts, "shop.Order", "line_sku", pb.IndexState_INDEX_STATE_READY)
	// And it is enforced.
	_, err := ts.Write(insert, []*anypb.Any{ts.Rec("shop.Order", `{"userId": 2, "id": 1, "line": {"sku": "s7"}}`)})
	servertest.WriteErr(t, err, codes.AlreadyExists)

	// A unique index over duplicated values fails its build, and says why.
	dupIdx := strings.Replace(withIdx, `index: { fields: "line.sku" unique: true }`,
		`index: { fields: "line.sku" unique: true } index: { fields: "user_id" unique: true }`, 1)
	ts.MustApply(map[string]string{"shop.proto": dupIdx})
	ix := waitIndex(t, ts, "shop.Order", "user_id", pb.IndexState_INDEX_STATE_FAILED)
	if !strings.Contains(ix.Error, "unique") {
		t.Fatalf("failed index error %q", ix.Error)
	}
	// Writes go on; the failed index is not enforced.
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.Order", `{"userId": 1, "id": 99999, "line": {"sku": "new"}}`)})
}

func waitIndex(t *testing.T, ts *testServer, typ, name string, want pb.IndexState) *pb.Index {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := ts.C.GetSchema(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.Types {
			if rt.Name != typ {
				continue
			}
			for _, ix := range rt.Indexes {
				if ix.Name == name && ix.State == want {
					return ix
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("index %s.%s never reached %v: %v", typ, name, want, resp.Types)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
