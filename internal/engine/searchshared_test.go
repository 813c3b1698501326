package engine_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/testschema"
)

// On a shared store (etcd), requests of plain primary-key lookups are
// answered as wire bytes too, their records read together in as few
// transactions as the cluster allows, with the answers the message path
// gives: records, missing keys, keys-only and count lookups, two record
// types. The cluster's --max-txn-ops (100) is below the largest request's
// lookups (250), so its records are read in several transactions.
func TestSharedSearchWireMatchesMessages(t *testing.T) {
	st, err := etcd.Open(etcd.Options{Endpoints: []string{etcdtest.Start(t, etcdtest.Limits{MaxTxnOps: 100})},
		Prefix: "/wire/", RequestTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, err := engine.Open(t.Context(), st, engine.Options{MaxResultRecords: 64, MaxResultBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": shopProto}}); err != nil {
		t.Fatal(err)
	}
	rec := func(typeName, js string) *anypb.Any {
		a, err := testschema.Record(e.Schema().Types[protoreflect.FullName(typeName)].Desc, js)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	w := e.NewWriter()
	defer w.Close()
	for first := 0; first < 300; first += 10 { // a batch's records and index entries within 100 operations
		var recs []*anypb.Any
		for id := first; id < first+10; id++ {
			recs = append(recs, rec("shop.User", fmt.Sprintf(`{"id":%d,"name":"%d","email":"u%d@x"}`, id, id, id)))
			if id%3 == 0 {
				recs = append(recs, rec("shop.Member", fmt.Sprintf(`{"org":"o","id":%d,"handle":"h%d"}`, id, id)))
			}
		}
		if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	var many []*pb.Query
	for id := range 250 {
		q := lookup(id * 7 % 320) // some past the last user
		switch id % 5 {
		case 1:
			q.KeysOnly = true
		case 2:
			q.Count = true
		}
		many = append(many, q)
	}
	member := &pb.Query{Type: "shop.Member", Where: &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: []*pb.Expr{
		{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "org", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_String_{String_: "o"}}}}},
		{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: 3}}}}},
	}}}}}
	reqs := [][]*pb.Query{{lookup(7)}, many, {lookup(299), lookup(1000), lookup(3)}, {}, {lookup(5), member}, {lookup(2000)}}
	want, _, _ := searchAnswers(t, e, reqs, false)
	got, _, _ := searchAnswers(t, e, reqs, true) // fails unless a response went out as wire bytes
	if len(got) != len(want) {
		t.Fatalf("answers for %d queries, want %d", len(got), len(want))
	}
	found := 0
	for id, w := range want {
		if g := got[id]; fmt.Sprint(g) != fmt.Sprint(w) {
			t.Fatalf("query %d: wire %+v, messages %+v", id, g, w)
		}
		found += len(w.recs)
	}
	if found < 150 {
		t.Fatalf("%d records found in all: the lookups did not read the records", found)
	}
}
