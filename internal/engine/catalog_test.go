package engine_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
)

// shopWithIndex is shopProto with one more index on shop.User.
func shopWithIndex(ix string) string {
	return strings.Replace(shopProto, `index: { fields: "name" }`, `index: { fields: "name" }
    `+ix, 1)
}

func TestCatalogApplyAndReopen(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	resp := te.Apply(map[string]string{"shop.proto": shopProto})
	if !resp.Applied || !slices.Equal(resp.Plan.TypesAdded, []string{"shop.Member", "shop.User"}) {
		t.Fatalf("plan %v, want shop.Member and shop.User added", resp)
	}
	again := te.Apply(map[string]string{"shop.proto": shopProto})
	if again.Applied || again.Version != resp.Version {
		t.Fatalf("re-applying the same schema: %v, want no change at version %d", again, resp.Version)
	}
	// Any type URL prefix names the type by its last part.
	u := te.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "a"}`)
	u.TypeUrl = "example.com/any/prefix/shop.User"
	te.MustWrite(engine.OpInsert, []*anypb.Any{u})

	te = te.reopen()
	if v := te.E.Schema().Version; v != resp.Version {
		t.Fatalf("version %d after reopen, want %d", v, resp.Version)
	}
	gs, err := te.E.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range gs.Types {
		for _, ix := range rt.Indexes {
			if ix.State != pb.IndexState_INDEX_STATE_READY {
				t.Errorf("%s index %s is %v after reopen, want READY", rt.Name, ix.Name, ix.State)
			}
		}
	}
	// The reopened catalog still enforces the unique index.
	err = te.Write(engine.OpInsert, []*anypb.Any{te.Rec("shop.User", `{"id": 2, "email": "a"}`)})
	wantWriteError(t, err, apierror.AlreadyExists, 0, 0)
	te.MustCheck()
}

func TestCatalogIndexBuild(t *testing.T) {
	te := newEngine(t)
	var recs []*anypb.Any
	for i := 0; i < 2500; i++ { // more than one build step
		recs = append(recs, te.Rec("shop.User", `{"id": `+itoa(i)+`, "name": "n`+itoa(i%7)+`", "email": "e`+itoa(i)+`"}`))
	}
	te.MustWrite(engine.OpInsert, recs)

	// A unique index on distinct values builds and is enforced.
	schema := shopWithIndex(`index: { fields: ["name", "id"] unique: true name: "by_name_id" }`)
	resp := te.Apply(map[string]string{"shop.proto": schema})
	if len(resp.Plan.IndexesAdded) != 1 || !resp.Plan.IndexesAdded[0].BuildRequired {
		t.Fatalf("plan %v, want one index to build", resp.Plan)
	}
	if ix := waitIndexNamed(t, te, "by_name_id"); ix.State != pb.IndexState_INDEX_STATE_READY {
		t.Fatalf("index %v, want READY", ix)
	}
	if r := te.MustCheck(); r.Entries != 3*2500 || r.Records != 2500 {
		t.Fatalf("check read %d records and %d entries, want 2500 and 7500", r.Records, r.Entries)
	}

	// A unique index on shared values fails, keeps no entries, and writes
	// do not maintain it.
	te.ApplyDropping(map[string]string{"shop.proto": shopWithIndex(`index: { fields: "name" unique: true name: "uniq_name" }`)}, "shop.User.by_name_id")
	ix := waitIndexNamed(t, te, "uniq_name")
	if ix.State != pb.IndexState_INDEX_STATE_FAILED || ix.Error == "" {
		t.Fatalf("index %v, want FAILED with its reason", ix)
	}
	te.MustWrite(engine.OpInsert, []*anypb.Any{te.Rec("shop.User", `{"id": 9000, "name": "n1", "email": "new"}`)})
	te.MustCheck()
}

// waitIndexNamed waits until an index reaches a final state (READY or
// FAILED) and returns it.
func waitIndexNamed(t *testing.T, te *testEngine, name string) *pb.Index {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		gs, err := te.E.GetSchema(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range gs.Types {
			for _, ix := range rt.Indexes {
				if ix.Name == name && ix.State != pb.IndexState_INDEX_STATE_BUILDING {
					return ix
				}
			}
		}
		time.Sleep(time.Millisecond) // polling a state, not waiting out a race
	}
	t.Fatalf("index %s not built in time", name)
	return nil
}

func TestCatalogDropType(t *testing.T) {
	te := newEngine(t)
	te.MustWrite(engine.OpInsert, []*anypb.Any{te.Rec("shop.Member", `{"org": "o", "id": 1, "handle": "h"}`)})
	withoutMember, _, found := strings.Cut(shopProto, "message Member")
	if !found {
		t.Fatal("shopProto has no message Member")
	}
	_, err := te.E.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": withoutMember}})
	if apierror.CodeOf(err) != apierror.FailedPrecondition && apierror.CodeOf(err) != apierror.InvalidArgument {
		t.Fatalf("dropping a type with data without allow_drop: %v", err)
	}
	resp, err := te.E.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": withoutMember}, AllowDrop: []string{"shop.Member"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Plan.TypesDropped) != 1 || resp.Plan.TypesDropped[0].Records != 1 {
		t.Fatalf("plan %v, want shop.Member dropped with 1 record", resp.Plan)
	}
	te.MustCheck()
	// Re-added, the type starts empty.
	te.Apply(map[string]string{"shop.proto": shopProto})
	if n := len(te.stored("shop.Member")); n != 0 {
		t.Fatalf("re-added type holds %d records", n)
	}
	te.MustWrite(engine.OpInsert, []*anypb.Any{te.Rec("shop.Member", `{"org": "o", "id": 1, "handle": "h"}`)})
	te.MustCheck()
}

func itoa(i int) string { return strconv.Itoa(i) }
