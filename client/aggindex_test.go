package client_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

const playerProto = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";
message Player {
  option (protobase.v1.record) = {
    primary_key: "id"
    aggregate: { name: "by_team" group_by: "team" sum: "score" }
  };
  int64 id = 1;
  string team = 2;
  int64 score = 3;
}
`

// TestAggregateIndex: the schema describes an aggregate index, and an
// aggregation it covers is answered from it, as the plan says.
func TestAggregateIndex(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.ApplySchema(ctx, map[string]string{"player.proto": playerProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for id := range 10 {
		v := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(id))
		v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), []string{"red", "blue"}[id%2])
		v = protowire.AppendVarint(protowire.AppendTag(v, 3, protowire.VarintType), uint64(id))
		if err := w.WriteAny(&anypb.Any{TypeUrl: "type.googleapis.com/shop.Player", Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fns, err := client.ParseAggregates("count(),sum(score)")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Aggregate(ctx, &pb.Query{Type: "shop.Player", Explain: true}, &pb.Aggregate{GroupBy: []string{"team"}, Functions: fns})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Plan.GetText(), "aggregate index by_team [1 range]") || len(res.Rows) != 2 ||
		res.Rows[0].Group[0].GetStringValue() != "blue" || res.Rows[0].Values[1].GetNumberValue() != 25 || res.Rows[1].Values[1].GetNumberValue() != 20 {
		t.Fatalf("rows %v, plan %s", res.Rows, res.Plan.GetText())
	}
}
