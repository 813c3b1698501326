package engine_test

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// A schema change that changes how records expire deletes the records
// expired under the old rule first, so none reads again under the new one:
// here the unit of tt.Token's integer field goes from milliseconds to
// seconds (which would put every expiry far ahead) and tt.Session's ttl
// goes. A record expiring after that reap, while the change commits, is
// found at the commit, and the change reaps and tries again. Each deleted
// record is an expiry in the change log.
func TestTTLChangeReapsUnderOldRule(t *testing.T) {
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		now := xe.now.Load()
		xe.insert([]*anypb.Any{
			xe.token(expiring{id: 1, exp: now + int64(time.Second)}),
			xe.token(expiring{id: 2, exp: now + int64(2*time.Second)}),
			xe.token(expiring{id: 3, exp: now + int64(time.Hour)}),
			xe.session(expiring{id: 1, exp: now + int64(time.Second)}),
			xe.session(expiring{id: 2}),
		})
		xe.now.Add(int64(1500 * time.Millisecond)) // the token and the session of id 1 have expired
		clog := xe.e.ChangeLog()
		from := clog.Durable().Value()
		planned := 0
		engine.SetPlannedHook(t, func() {
			if planned++; planned == 1 {
				xe.now.Add(int64(time.Second)) // token 2 expires after the first reap
			}
		})
		seconds := strings.Replace(expiryProto, "unit: TTL_UNIT_MILLISECONDS", "unit: TTL_UNIT_SECONDS", 1)
		noSessionTTL := strings.Replace(seconds, "    ttl: { field: \"expires_at\" }\n", "", 1)
		resp, err := xe.e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"tt.proto": noSessionTTL}})
		if err != nil || !resp.Applied {
			t.Fatalf("apply: %v, %v", resp, err)
		}
		if planned != 2 {
			t.Fatalf("planned %d times, want 2: the commit must find token 2 expired and reap again", planned)
		}
		if n := xe.count("tt.Token"); n != 1 {
			t.Fatalf("%d tokens read under the new unit, want 1 (token 3)", n)
		}
		if n := xe.count("tt.Session"); n != 1 {
			t.Fatalf("%d sessions read without a ttl, want 1 (id 2)", n)
		}
		if clog.On() {
			got := xe.expiredInLog(from, clog.Durable().Value())
			slices.Sort(got)
			if want := []string{"tt.Session1", "tt.Token1", "tt.Token2"}; !slices.Equal(got, want) {
				t.Fatalf("expiries in the change log: %v, want %v", got, want)
			}
		}
		rep, err := engine.Check(t.Context(), xe.st)
		if err != nil || !rep.OK() {
			t.Fatalf("check: %v, %v", rep, err)
		}
	})
}

// Records that keep expiring under the old rule while the change commits
// make it give up after its attempts, changing nothing; and a ttl whose
// expiry index is still being built cannot change (its expired records
// cannot be found to reap), dry run included.
func TestTTLChangeRefused(t *testing.T) {
	xe := newExpiryEngine(t, expiryPebble(t)).open(engine.Options{})
	now := xe.now.Load()
	var recs []*anypb.Any
	for id := int64(1); id <= 10; id++ {
		recs = append(recs, xe.token(expiring{id: id, exp: now + id*int64(time.Second)}))
	}
	xe.insert(recs)
	engine.SetPlannedHook(t, func() { xe.now.Add(int64(time.Second)) })
	seconds := strings.Replace(expiryProto, "unit: TTL_UNIT_MILLISECONDS", "unit: TTL_UNIT_SECONDS", 1)
	_, err := xe.e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"tt.proto": seconds}})
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Code != apierror.Aborted || !strings.Contains(ae.Msg, "expiring under a ttl") {
		t.Fatalf("apply while records keep expiring: %v, want ABORTED", err)
	}
	if u := xe.e.Schema().Types["tt.Token"].TTL.Unit; u != pb.TTLUnit_TTL_UNIT_MILLISECONDS {
		t.Fatalf("unit after the refused change: %v", u)
	}
	engine.SetPlannedHook(t, nil)

	// A ttl added to a type with records is built; until then it stays.
	noTTL := strings.Replace(expiryProto, "    ttl: { field: \"expires_at\" }\n", "", 1)
	if _, err := xe.e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"tt.proto": noTTL}}); err != nil {
		t.Fatal(err)
	}
	xe.insert([]*anypb.Any{xe.session(expiring{id: 1, exp: xe.now.Load() - int64(time.Second)})})
	// The build waits for the gate; the test ends once the build is over,
	// so that no builder reads the hook the cleanup resets.
	gate := make(chan struct{})
	engine.SetBuildHook(t, func() { <-gate })
	open := true
	defer func() {
		if open {
			close(gate)
		}
	}()
	if _, err := xe.e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"tt.proto": expiryProto}}); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		_, err := xe.e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"tt.proto": noTTL}, DryRun: dry})
		if !errors.As(err, &ae) || ae.Code != apierror.FailedPrecondition || !strings.Contains(ae.Msg, "tt.Session") {
			t.Fatalf("ttl removed while its index is built (dry run %v): %v, want FAILED_PRECONDITION", dry, err)
		}
	}
	if n := xe.count("tt.Session"); n != 0 {
		t.Fatalf("%d sessions read, want 0: the one stored has expired", n)
	}
	close(gate)
	open = false
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		ix, _ := xe.e.Schema().Types["tt.Session"].Index(schema.ExpiryIndexName)
		if ix.State == pb.IndexState_INDEX_STATE_READY {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expiry index of tt.Session: %v", ix.State)
		}
	}
}

// On a store servers share, a record expired under the old ttl that
// another server writes after the change's checks, just before its commit,
// fails the commit (the checks are its preconditions): the change reaps it
// and commits, and it never reads again. Here B writes a token already
// past its expiry; under the new unit it would read as live.
func TestTTLChangeSharedStore(t *testing.T) {
	ep := etcdtest.Start(t, etcdtest.Roomy)
	a := newExpiryEngine(t, etcdStore(t, ep, "/ttlshared/")).open(engine.Options{})
	b := newExpiryEngine(t, etcdStore(t, ep, "/ttlshared/")).open(engine.Options{Now: a.clock})
	var fired atomic.Bool
	engine.SetCommittingHook(t, func() {
		if fired.CompareAndSwap(false, true) {
			b.insert([]*anypb.Any{b.token(expiring{id: 9, exp: a.now.Load() - int64(time.Second)})})
		}
	})
	seconds := strings.Replace(expiryProto, "unit: TTL_UNIT_MILLISECONDS", "unit: TTL_UNIT_SECONDS", 1)
	resp, err := a.e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"tt.proto": seconds}})
	if err != nil || !resp.Applied || !fired.Load() {
		t.Fatalf("apply: %v, %v (B wrote: %v)", resp, err, fired.Load())
	}
	if n := a.count("tt.Token"); n != 0 {
		t.Fatalf("%d tokens read under the new unit, want 0: B's was past its expiry when the change committed", n)
	}
}
