package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
)

const expiryServerProto = `syntax = "proto3";
package tt;
import "protobase/v1/options.proto";
import "google/protobuf/timestamp.proto";
message Session {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "team" }
    ttl: { field: "expires_at" }
  };
  int64 id = 1;
  string team = 2;
  google.protobuf.Timestamp expires_at = 3;
}
`

// TestExpiryWatch: over gRPC and REST, the reaper's deletions reach watchers as
// removes marked expired, with the old record when asked for, while a
// client's remove is not marked; on Pebble and on etcd, where two
// servers reap the same store at once and each record is deleted once.
func TestExpiryWatch(t *testing.T) {
	cfg := server.Config{TTLReapInterval: 20 * time.Millisecond}
	t.Run("pebble", func(t *testing.T) {
		cfg := cfg
		cfg.HTTPAddr = "127.0.0.1:0"
		ts := startServer(t, cfg)
		expiryWatch(t, ts)
		// Over REST the JSON changes carry "expired": true likewise.
		rc := &restClient{t: t, ts: ts, base: "http://" + ts.Srv.HTTPAddr(), hc: &http.Client{}}
		got := rc.openWatch(`{"types": ["tt.Session"], "start": {"oldest": true}}`, nil).changes(6)
		for i, c := range got {
			if want := i >= 4; c.Expired != want {
				t.Errorf("REST change %d: expired %v, want %v: %v", i, c.Expired, want, c)
			}
		}
	})
	t.Run("etcd", func(t *testing.T) {
		cfg := cfg
		cfg.Store, cfg.Etcd = server.StoreEtcd, server.EtcdConfig{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/tt/"}
		a := startServer(t, withDir(t, cfg))
		startServer(t, withDir(t, cfg)) // reaps too
		expiryWatch(t, a)
	})
}

func expiryWatch(t *testing.T, ts *testServer) {
	ts.MustApply(map[string]string{"tt.proto": expiryServerProto})
	ws := ts.watch(&pb.WatchRequest{Types: []string{"tt.Session"}, OldRecords: true})
	ws.first()
	exp := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	recs := []*anypb.Any{
		ts.Rec("tt.Session", fmt.Sprintf(`{"id": 1, "team": "a", "expires_at": %q}`, exp)),
		ts.Rec("tt.Session", fmt.Sprintf(`{"id": 2, "team": "a", "expires_at": %q}`, exp)),
		ts.Rec("tt.Session", `{"id": 3, "team": "a"}`),
	}
	ts.MustWrite(insert, recs)
	ts.MustWrite(pb.WriteOp_WRITE_OP_REMOVE, []*anypb.Any{ts.Rec("tt.Session", `{"id": 3}`)})
	var got []*pb.Change
	for len(got) < 6 {
		resp, err := ws.st.Recv()
		if err != nil {
			t.Fatalf("watch after %d changes: %v", len(got), err)
		}
		got = append(got, resp.Changes...)
	}
	if len(got) != 6 {
		t.Fatalf("%d changes, want 6: %v", len(got), got)
	}
	for i, c := range got[:3] {
		checkChange(t, c, pb.ChangeOp_CHANGE_OP_INSERT, "tt.Session", recs[i], nil)
	}
	checkChange(t, got[3], pb.ChangeOp_CHANGE_OP_REMOVE, "tt.Session", nil, recs[2])
	if got[3].Expired {
		t.Errorf("a client's remove is marked expired: %v", got[3])
	}
	for i, c := range got[4:] {
		checkChange(t, c, pb.ChangeOp_CHANGE_OP_REMOVE, "tt.Session", nil, recs[i])
		if !c.Expired {
			t.Errorf("the reaper's remove of record %d is not marked expired: %v", i+1, c)
		}
	}
	if n := ts.Count("tt.Session"); n != 0 {
		t.Errorf("%d sessions left", n)
	}
}

// TestExpiryReplacedWatch: an insert or upsert whose key holds an expired
// record the reaper has not deleted reaches watchers as that record's
// expiry (a remove marked expired, with the old record) and then an
// insert, on Pebble and on etcd alike; the deletion counts as expired.
func TestExpiryReplacedWatch(t *testing.T) {
	cfg := server.Config{TTLReapInterval: -1, MetricsAddr: "127.0.0.1:0"}
	t.Run("pebble", func(t *testing.T) { expiryReplacedWatch(t, startServer(t, cfg)) })
	t.Run("etcd", func(t *testing.T) {
		cfg := cfg
		cfg.Store, cfg.Etcd = server.StoreEtcd, server.EtcdConfig{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/tr/"}
		expiryReplacedWatch(t, startServer(t, withDir(t, cfg)))
	})
}

func expiryReplacedWatch(t *testing.T, ts *testServer) {
	ts.MustApply(map[string]string{"tt.proto": expiryServerProto})
	ws := ts.watch(&pb.WatchRequest{Types: []string{"tt.Session"}, OldRecords: true})
	ws.first()
	past := `"2000-01-01T00:00:00Z"`
	old := []*anypb.Any{
		ts.Rec("tt.Session", `{"id": 1, "team": "a", "expires_at": `+past+`}`),
		ts.Rec("tt.Session", `{"id": 2, "team": "a", "expires_at": `+past+`}`),
	}
	ts.MustWrite(insert, old)
	inserted := ts.Rec("tt.Session", `{"id": 1, "team": "b"}`)
	upserted := ts.Rec("tt.Session", `{"id": 2, "team": "c"}`)
	ts.MustWrite(insert, []*anypb.Any{inserted})
	ts.MustWrite(pb.WriteOp_WRITE_OP_UPSERT, []*anypb.Any{upserted})
	// The last change: what comes before it is all there is.
	last := ts.Rec("tt.Session", `{"id": 3}`)
	ts.MustWrite(insert, []*anypb.Any{last})
	var got []*pb.Change
	for len(got) == 0 || !proto.Equal(got[len(got)-1].Record, last) {
		resp, err := ws.st.Recv()
		if err != nil {
			t.Fatalf("watch after %d changes: %v", len(got), err)
		}
		got = append(got, resp.Changes...)
	}
	if len(got) != 7 {
		t.Fatalf("%d changes, want 7: %v", len(got), got)
	}
	checkChange(t, got[0], pb.ChangeOp_CHANGE_OP_INSERT, "tt.Session", old[0], nil)
	checkChange(t, got[1], pb.ChangeOp_CHANGE_OP_INSERT, "tt.Session", old[1], nil)
	for i, want := range []*anypb.Any{inserted, upserted} {
		exp, ins := got[2+2*i], got[3+2*i]
		checkChange(t, exp, pb.ChangeOp_CHANGE_OP_REMOVE, "tt.Session", nil, old[i])
		if !exp.Expired {
			t.Errorf("the expired record %d replaced is not marked expired: %v", i+1, exp)
		}
		checkChange(t, ins, pb.ChangeOp_CHANGE_OP_INSERT, "tt.Session", want, nil)
	}
	if n := ts.Count("tt.Session"); n != 3 {
		t.Errorf("%d sessions, want 3", n)
	}
	fams := scrape(t, "http://"+ts.Srv.MetricsAddr()+"/metrics")
	if v, _ := metricValue(fams, "protobase_records_expired_total", map[string]string{"type": "tt.Session"}); v != 2 {
		t.Errorf("records expired = %v, want 2", v)
	}
}

// TestExpiryMetrics: protobase_records_expired_total{type} and
// protobase_ttl_reaper_lag_seconds are served from start-up, at 0; the
// counter counts the reaper's deletions; the lag is how long ago the
// oldest expiry still on disk passed (with the reaper off, a record that
// expired in 2000 keeps it above 20 years).
func TestExpiryMetrics(t *testing.T) {
	metric := func(ts *testServer, name string, labels map[string]string) float64 {
		t.Helper()
		fams := scrape(t, "http://"+ts.Srv.MetricsAddr()+"/metrics")
		v, ok := metricValue(fams, name, labels)
		if !ok {
			t.Fatalf("no %s%v", name, labels)
		}
		return v
	}
	session := map[string]string{"type": "tt.Session"}
	past := `"2000-01-01T00:00:00Z"`

	ts := startServer(t, server.Config{MetricsAddr: "127.0.0.1:0", TTLReapInterval: 20 * time.Millisecond})
	ts.MustApply(map[string]string{"tt.proto": expiryServerProto})
	if v := metric(ts, "protobase_records_expired_total", session); v != 0 {
		t.Errorf("expired at start-up = %v, want 0", v)
	}
	if v := metric(ts, "protobase_ttl_reaper_lag_seconds", nil); v != 0 {
		t.Errorf("lag at start-up = %v, want 0", v)
	}
	ws := ts.watch(&pb.WatchRequest{Types: []string{"tt.Session"}})
	ws.first()
	ts.MustWrite(insert, []*anypb.Any{
		ts.Rec("tt.Session", `{"id": 1, "expires_at": `+past+`}`),
		ts.Rec("tt.Session", `{"id": 2, "expires_at": `+past+`}`),
		ts.Rec("tt.Session", `{"id": 3}`),
	})
	for n := 0; n < 5; { // three inserts, two removes by the reaper
		resp, err := ws.st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		n += len(resp.Changes)
	}
	// The reaper counts a batch once it returns, which may be a moment
	// after its watchers see it: wait for the count, within a bound on a
	// hang.
	for deadline := time.Now().Add(30 * time.Second); metric(ts, "protobase_records_expired_total", session) != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("expired after the reaper's pass = %v, want 2", metric(ts, "protobase_records_expired_total", session))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := metric(ts, "protobase_ttl_reaper_lag_seconds", nil); v != 0 {
		t.Errorf("lag with nothing left to reap = %v, want 0", v)
	}
	// The client's writes are counted as such; the reaper's are not.
	if v := metric(ts, "protobase_write_records_total", nil); v != 3 {
		t.Errorf("records written = %v, want the client's 3", v)
	}

	off := startServer(t, server.Config{MetricsAddr: "127.0.0.1:0", TTLReapInterval: -1})
	off.MustApply(map[string]string{"tt.proto": expiryServerProto})
	off.MustWrite(insert, []*anypb.Any{off.Rec("tt.Session", `{"id": 1, "expires_at": `+past+`}`)})
	if v := metric(off, "protobase_ttl_reaper_lag_seconds", nil); v < 20*365*24*3600 {
		t.Errorf("lag with the reaper off = %v s, want more than 20 years", v)
	}
	if v := metric(off, "protobase_records_expired_total", session); v != 0 {
		t.Errorf("expired with the reaper off = %v, want 0", v)
	}
}
