package main

import (
	"fmt"
	"strings"
	"testing"
)

const playerProto = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";
message Player {
  option (protobase.v1.record) = {
    primary_key: "id"
    aggregate: { name: "by_team" group_by: "team" sum: ["score", "minutes"] }
  };
  int64 id = 1;
  string team = 2;
  int64 score = 3;
  double minutes = 4;
}
`

// schema apply and get show an aggregate index with its groups and sums;
// query --agg over its fields reads it, and --explain says so.
func TestAggregateIndexCommand(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	p := writeFile(t, t.TempDir(), "player.proto", playerProto)
	r := mustCLI(t, "", "--addr", addr, "schema", "apply", p)
	wantContains(t, r.stdout+r.stderr, "shop.Player aggregate index by_team group by (team) sum (score, minutes)")
	r = mustCLI(t, "", "--addr", addr, "schema", "get")
	wantContains(t, r.stdout, "aggregate index by_team group by (team) count, sum (score, minutes) ready")
	var in strings.Builder
	for id := range 8 {
		team := "red"
		if id%4 == 0 {
			team = "blue"
		}
		fmt.Fprintf(&in, `{"id": %d, "team": %q, "score": %d, "minutes": %d}`+"\n", id, team, id, id)
	}
	mustCLI(t, in.String(), "--addr", addr, "insert", "--type", "shop.Player")
	r = mustCLI(t, "", "--addr", addr, "query", "--type", "shop.Player", "--group-by", "team", "--agg", "count(),sum(score),avg(minutes)", "--explain")
	want := `{"team":"blue","count()":2,"sum(score)":4,"avg(minutes)":2}` + "\n" + `{"team":"red","count()":6,"sum(score)":24,"avg(minutes)":4}` + "\n"
	if r.stdout != want {
		t.Fatalf("printed %q, want %q", r.stdout, want)
	}
	wantContains(t, r.stderr, "plan: aggregate index by_team [1 range] aggregate group by team: count(), sum(score), avg(minutes) parallel 1")
}
