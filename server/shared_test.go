package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// sharedPair starts two servers on one etcd store (one member, one
// prefix), with shopProto applied through the first.
func sharedPair(t *testing.T, lim etcdtest.Limits) (a, b *testServer, cfg server.Config) {
	t.Helper()
	cfg = server.Config{Store: server.StoreEtcd, Etcd: server.EtcdConfig{
		Endpoints: []string{etcdtest.Start(t, lim)}, Prefix: "/shared/"}}
	a = startServer(t, withDir(t, cfg))
	a.MustApply(map[string]string{"shop.proto": shopProto})
	b = startServer(t, withDir(t, cfg))
	return a, b, cfg
}

func withDir(t *testing.T, cfg server.Config) server.Config {
	cfg.DataDir = t.TempDir()
	return cfg
}

// Two servers race to insert the same primary keys, and different records
// with the same unique values: exactly one insert wins each race, the
// other gets ALREADY_EXISTS naming the field, and the store stays
// consistent.
func TestSharedRaceInserts(t *testing.T) {
	a, b, cfg := sharedPair(t, etcdtest.Roomy)
	const n = 40
	race := func(i int, recA, recB *anypb.Any) [2]error {
		var out [2]error
		var wg sync.WaitGroup
		for k, ts := range []*testServer{a, b} {
			rec := recA
			if k == 1 {
				rec = recB
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, out[k] = ts.Write(insert, []*anypb.Any{rec})
			}()
		}
		wg.Wait()
		return out
	}
	wins := [2]int{}
	check := func(what string, i int, errs [2]error, field string) {
		t.Helper()
		ok := 0
		for k, err := range errs {
			if err == nil {
				ok++
				wins[k]++
				continue
			}
			if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Field != field {
				t.Errorf("%s %d: the loser was refused on field %q, want %q", what, i, we.Field, field)
			}
		}
		if ok != 1 {
			t.Errorf("%s %d: %d inserts won, want exactly 1 (%v)", what, i, ok, errs)
		}
	}
	for i := range n {
		same := a.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "pk%d@example.com"}`, i, i))
		check("primary key", i, race(i, same, same), "id")
		check("unique email", i, race(i,
			a.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d@example.com"}`, 1000+i, i)),
			a.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d@example.com"}`, 2000+i, i))), "email")
	}
	t.Logf("wins: server A %d, server B %d", wins[0], wins[1])
	if got := b.Count("shop.User"); got != 2*n {
		t.Errorf("%d users stored, want %d", got, 2*n)
	}
	backends[1].MustCheck(t, cfg, "after the races")
}

// A schema applied on one server is in force on the other at once: a
// record of a type added (and of a field added) a moment ago on A is
// accepted by B, never refused as unknown.
func TestSharedSchemaChange(t *testing.T) {
	a, b, _ := sharedPair(t, etcdtest.Roomy)
	// B has served shop.User before the change.
	b.MustWrite(insert, []*anypb.Any{a.Rec("shop.User", `{"id": 1, "email": "one@example.com"}`)})
	v2 := strings.Replace(shopProto, "repeated string tags = 4;", "repeated string tags = 4;\n  string city = 5;", 1) +
		"\nmessage Coupon {\n  option (protobase.v1.record) = { primary_key: \"code\" };\n  string code = 1;\n}\n"
	a.MustApply(map[string]string{"shop.proto": v2})
	b.MustWrite(insert, []*anypb.Any{
		a.Rec("shop.Coupon", `{"code": "WELCOME"}`),
		a.Rec("shop.User", `{"id": 2, "email": "two@example.com", "city": "Oslo"}`),
	})
	if got := a.Count("shop.Coupon"); got != 1 {
		t.Errorf("A reads %d coupons written through B, want 1", got)
	}
}

// A write acknowledged by one server is seen by a read that starts
// afterwards on the other.
func TestSharedReadAfterWrite(t *testing.T) {
	a, b, _ := sharedPair(t, etcdtest.Roomy)
	for i := range 20 {
		a.MustWrite(insert, []*anypb.Any{a.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d@example.com"}`, i, i))})
		if got := b.Count("shop.User"); got != i+1 {
			t.Fatalf("after %d inserts on A, B reads %d users", i+1, got)
		}
	}
}

// A batch beyond the cluster's transaction limits is refused whole with
// RESOURCE_EXHAUSTED naming the etcd flag that raises it.
func TestSharedBatchLimit(t *testing.T) {
	a, _, _ := sharedPair(t, etcdtest.Limits{})
	var recs []*anypb.Any
	for i := range 100 { // 100 records and 200 index entries: over 128 operations
		recs = append(recs, a.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d@example.com", "name": "n"}`, i, i)))
	}
	_, err := a.Write(insert, recs)
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-txn-ops") {
		t.Fatalf("a batch of 300 operations: %v; want RESOURCE_EXHAUSTED naming --max-txn-ops", err)
	}
	if got := a.Count("shop.User"); got != 0 {
		t.Errorf("%d users stored after the refused batch", got)
	}
	a.MustWrite(insert, recs[:10])
}

// API keys live in the store: a key created on one server is accepted by
// the other, and a key revoked on one is refused by the other.
func TestSharedAPIKeys(t *testing.T) {
	cfg := server.Config{Store: server.StoreEtcd, Auth: true, Etcd: server.EtcdConfig{
		Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/keys/"}}
	a := startServer(t, withDir(t, cfg))
	b := startServer(t, withDir(t, cfg))
	key, _, err := a.Srv.Keys().Create(nil, "reader", auth.RoleRead, nil)
	if err != nil {
		t.Fatal(err)
	}
	verified := func() bool {
		_, err := b.Srv.Keys().Verify(t.Context(), key)
		return err == nil
	}
	eventually(t, "B accepts the key created on A", verified)
	if err := a.Srv.Keys().Revoke(nil, "reader"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B refuses the key revoked on A", func() bool { return !verified() })
}

// eventually polls cond, which a watch makes true in the background, for
// up to 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// An index build on a shared store runs on one server, and when that
// server goes away mid-build another one takes the build's lock and
// finishes it from the checkpoint; the index then agrees with the records
// and is enforced on both.
func TestSharedIndexBuildMovesOn(t *testing.T) {
	a, b, cfg := sharedPair(t, etcdtest.Roomy)
	var batch []*anypb.Any
	for i := range 600 { // several build steps of a shared store
		batch = append(batch, a.Rec("shop.Order", fmt.Sprintf(`{"userId": 1, "id": %d, "line": {"sku": "s%d"}}`, i, i)))
	}
	a.MustWrite(insert, batch)
	withIdx := strings.Replace(shopProto, `option (protobase.v1.record) = { primary_key: ["user_id", "id"] };`,
		`option (protobase.v1.record) = { primary_key: ["user_id", "id"] index: { fields: "line.sku" unique: true } };`, 1)
	a.MustApply(map[string]string{"shop.proto": withIdx})
	a.Stop() // mid-build, most likely: B's builder takes over
	a.C = nil
	waitIndex(t, b, "shop.Order", "line_sku", pb.IndexState_INDEX_STATE_READY)
	backends[1].MustCheck(t, cfg, "after the build")
	b.ForgetDescriptors() // the schema changed through a
	_, err := b.Write(insert, []*anypb.Any{b.Rec("shop.Order", `{"userId": 2, "id": 1, "line": {"sku": "s7"}}`)})
	if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Field != "line.sku" {
		t.Errorf("a duplicate sku was refused on field %q", we.Field)
	}
}
