package cluster_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/server"
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

// TestIndexBuildHandover kills (SIGKILL) the server building an index on
// a shared store; the other server, waiting on the build's lock, takes it
// over once the dead server's lease lapses, resumes from the checkpoint,
// and the index ends READY, agreeing with the records.
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
	st, err := ca.API().Insert(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < records/batch; b++ {
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

	// The second server starts before the index exists: it learns of the
	// build from the schema watch and waits on the build's lock.
	b, err := c.AddServer(ctx, cluster.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := client.Dial(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if _, err := ca.ApplySchema(ctx, buildSchema(true), client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let the build start: the kill must land mid-build
	if state := indexState(t, cb); state != pb.IndexState_INDEX_STATE_BUILDING {
		t.Logf("index already %v when the builder was killed: the handover is not exercised this run", state)
	}
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
	t.Logf("the other server finished the build %v after the kill", time.Since(killed).Round(time.Millisecond))

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
	if !report.OK() {
		t.Fatalf("the index disagrees with the records after the handover: %+v", report)
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
