package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/tests/robustness/harness"
)

const buildProto = `syntax = "proto3";
package build;
import "protobase/v1/options.proto";

message Rec {
  option (protobase.v1.record) = { primary_key: "id" %s };
  int64 id = 1;
  string name = 2;
}
`

func buildSchema(index bool) map[string]string {
	ix := ""
	if index {
		ix = `index: { fields: "name" }`
	}
	return map[string]string{"build.proto": fmt.Sprintf(buildProto, ix)}
}

// TestIndexBuildHandover stops the server building an index on a shared
// store while the build is provably in progress, and checks that the
// other server takes it over: the first server's lock lapses with its
// lease, the second holds it, resumes after the first one's checkpoint,
// and the index ends READY, agreeing with the records.
//
// The build runs on one server alone until its checkpoint in etcd shows
// progress; that server is then paused (SIGSTOP: its lease is no longer
// kept alive) and only then is the second server started, so the build
// cannot be finished but by a handover. The test reads the build's keys
// in etcd (keyspace.BuildKey: the checkpoint, and under it the lock's
// keys, one per waiting server, named by lease) to see each step.
func TestIndexBuildHandover(t *testing.T) {
	c := startCluster(t, 1)
	a := c.Servers[0]
	ca, err := client.Dial(a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	ctx := t.Context()
	if _, err := ca.ApplySchema(ctx, buildSchema(false), client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	const records, batch = 6000, 500
	insertBuildRecords(t, ca, records, batch)
	etc := newClient(t, c.Etcd.Endpoints())

	// A builds alone; it is paused as soon as its checkpoint shows
	// progress (a few of the build's ~190 steps at most).
	if _, err := ca.ApplySchema(ctx, buildSchema(true), client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	paused := pauseMidBuild(t, a, etc)
	holderA := paused.lock[0]

	// B starts while A's lock has yet to lapse: it finds the index
	// BUILDING and waits on the lock.
	b, err := c.AddServer(ctx, cluster.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := client.Dial(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if state := indexState(t, cb); state != pb.IndexState_INDEX_STATE_BUILDING {
		t.Fatalf("index %v once %s was paused mid-build, want BUILDING", state, a.Name)
	}
	waitLockWaiter(t, etc, b, holderA)
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	deadline := time.Now().Add(90 * time.Second)
	for indexState(t, cb) == pb.IndexState_INDEX_STATE_BUILDING {
		if time.Now().After(deadline) {
			t.Fatal("the index is still BUILDING 90 s after its builder was killed")
		}
		time.Sleep(200 * time.Millisecond) // polling a state, bounded by the deadline
	}
	if state := indexState(t, cb); state != pb.IndexState_INDEX_STATE_READY {
		t.Fatalf("index %v after the handover, want READY", state)
	}
	t.Logf("%s finished the build %v after %s was killed", b.Name, time.Since(killed).Round(time.Millisecond), a.Name)
	checkHandover(t, etc, paused.rev, holderA, paused.checkpoint)

	// Reads by the index agree with the records.
	p, err := cb.Query(ctx, &pb.Query{Type: "build.Rec", Count: true, Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
		Field: "name", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_String_{String_: "n7"}}}}}}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Count != records/100 {
		t.Fatalf("name = n7 counts %d by the index, want %d", p.Count, records/100)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	report, err := server.CheckEtcd(rctx, server.EtcdConfig{Endpoints: c.Etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	harness.MustBeConsistent(t, report, "after the handover")
}

// pauseMidBuild pauses a, the only server, as soon as the build's
// checkpoint in etcd shows progress, and returns the build keys as the
// pause left them: a checkpoint, and a's key of the lock alone.
func pauseMidBuild(t *testing.T, a *cluster.Server, etc *clientv3.Client) buildKeys {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); readBuildKeys(t, etc).checkpoint == nil; time.Sleep(time.Millisecond) { // polling etcd, bounded
		if time.Now().After(deadline) {
			t.Fatal("no build checkpoint in etcd a minute after the index was applied")
		}
	}
	if err := a.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := settledBuildKeys(t, etc)
	if paused.checkpoint == nil || len(paused.lock) != 1 {
		t.Fatalf("after pausing %s: checkpoint %q, lock keys %q: want the build in progress, locked by %s alone",
			a.Name, paused.checkpoint, paused.lock, a.Name)
	}
	return paused
}

// waitLockWaiter waits until b has a key of the build's lock besides
// holderA's: its builder waits for the lock (or, once holderA's lease
// lapsed, holds it).
func waitLockWaiter(t *testing.T, etc *clientv3.Client, b *cluster.Server, holderA string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // polling etcd, bounded
		k := readBuildKeys(t, etc)
		if len(k.lock) > 0 && k.lock[len(k.lock)-1] != holderA {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never waited on the build's lock: lock keys %q", b.Name, k.lock)
		}
	}
}

// insertBuildRecords inserts build.Rec records 1..n in batches of batch.
func insertBuildRecords(t *testing.T, c *client.Client, n, batch int) {
	t.Helper()
	st, err := c.API().Insert(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < n/batch; b++ {
		var recs []*anypb.Any
		for i := range batch {
			id := b*batch + i + 1
			v := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(id))
			v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), "n"+strconv.Itoa(id%100))
			recs = append(recs, &anypb.Any{TypeUrl: "type.googleapis.com/build.Rec", Value: v})
		}
		if err := st.Send(&pb.WriteRequest{Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
}

// buildPrefix starts the keys of index builds in etcd under the servers'
// default prefix: a build's checkpoint is buildPrefix and the index id
// (4 bytes), and its lock's keys are the checkpoint's key, "/" and the
// lease of the server waiting for or holding the lock.
const buildPrefix = "/protobase/" + keyspace.BuildPrefix

// buildKeys are the build keys in etcd at revision rev: the
// checkpoint's value (nil without one) and the lock's keys, holder first.
type buildKeys struct {
	rev        int64
	checkpoint []byte
	lock       []string
}

func readBuildKeys(t *testing.T, etc *clientv3.Client) buildKeys {
	t.Helper()
	resp, err := etc.Get(t.Context(), buildPrefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	k := buildKeys{rev: resp.Header.Revision}
	for _, kv := range resp.Kvs {
		switch rest := strings.TrimPrefix(string(kv.Key), buildPrefix); {
		case len(rest) == 4:
			k.checkpoint = kv.Value
		case len(rest) > 5 && rest[4] == '/':
			k.lock = append(k.lock, string(kv.Key))
		}
	}
	return k
}

// settledBuildKeys reads the build keys once etcd's revision stays put
// for a moment: a step the paused builder sent just before it stopped has
// landed by then, and nothing else writes.
func settledBuildKeys(t *testing.T, etc *clientv3.Client) buildKeys {
	t.Helper()
	k := readBuildKeys(t, etc)
	for range 100 {
		time.Sleep(50 * time.Millisecond) // a quiet interval, not a synchronisation: the revisions decide
		next := readBuildKeys(t, etc)
		if next.rev == k.rev {
			return next
		}
		k = next
	}
	t.Fatalf("etcd's revision still moves 5 s after the builder was paused (at %d)", k.rev)
	return k
}

// checkHandover reads the history of the build keys after revision rev
// (when the first builder, holding the lock as holderA, had written
// checkpoint and was paused): its lock key lapsed with its lease; only
// then was the checkpoint written again, past where the first builder
// stopped (the second resumed, it did not start over), and at last
// removed as the build ended.
func checkHandover(t *testing.T, etc *clientv3.Client, rev int64, holderA string, checkpoint []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	wc := etc.Watch(ctx, buildPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	lapsed, resumed, ended := false, false, false
	for !ended {
		resp, ok := <-wc
		if !ok || resp.Err() != nil {
			t.Fatalf("history of the build keys after revision %d: %v (lapsed %v, resumed %v)", rev, resp.Err(), lapsed, resumed)
		}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			switch {
			case key == holderA && ev.Type == clientv3.EventTypeDelete:
				lapsed = true
			case len(key) != len(buildPrefix)+4:
			case !lapsed:
				t.Fatalf("the checkpoint changed (%v) while the first builder still held the lock", ev.Type)
			case ev.Type == clientv3.EventTypeDelete:
				ended = true
			case !resumed && bytes.Compare(ev.Kv.Value, checkpoint) <= 0:
				t.Fatalf("the second builder's first checkpoint %q is not past the first one's %q: it started over", ev.Kv.Value, checkpoint)
			default:
				resumed = true
			}
		}
	}
	if !resumed {
		t.Fatal("the build ended with no checkpoint of the second builder")
	}
}

func indexState(t *testing.T, c *client.Client) pb.IndexState {
	t.Helper()
	gs, err := c.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range gs.GetTypes() {
		for _, ix := range rt.GetIndexes() {
			if ix.GetName() == "name" {
				return ix.GetState()
			}
		}
	}
	return pb.IndexState_INDEX_STATE_UNSPECIFIED
}
