package server_test

import (
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// Aggregates travel over REST and NATS, in JSON: rows of group values and
// aggregate values, integers as numbers, absent values as null.
func TestAggregateOverTransports(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	filterUsers(t, ts)
	body := `{"query": {"type": "shop.User", "filter": "id <= 4",
		"aggregate": {"groupBy": ["name"], "functions": [{"op": "AGGREGATE_OP_COUNT"}, {"op": "AGGREGATE_OP_SUM", "field": "id"}, {"op": "AGGREGATE_OP_MAX", "field": "email"}]}}}`
	for _, c := range restClients(t, ts) {
		code, b := c.post("/v1/query", body)
		want := `"rows":[{"group":["ann"],"values":[1,1,"ann@x"]},{"group":["anna"],"values":[1,2,"anna@x"]},{"group":["bob"],"values":[1,3,"bob@x"]},{"group":["cy"],"values":[1,4,"cy@x"]}]`
		if code != http.StatusOK || !strings.Contains(strings.ReplaceAll(string(b), " ", ""), want) {
			t.Fatalf("rest %s: %d %s", c.name(), code, b)
		}
		code, b = c.post("/v1/query", `{"query": {"type": "shop.User", "aggregate": {"groupBy": ["nope"], "functions": [{"op": "AGGREGATE_OP_COUNT"}]}}}`)
		if code != http.StatusBadRequest || !strings.Contains(string(b), `\"nope\"`) {
			t.Fatalf("rest %s bad group_by: %d %s", c.name(), code, b)
		}
	}

	// The same over NATS, in protobuf and in JSON.
	var req pb.QueryRequest
	if err := protojson.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	for _, json := range []bool{false, true} {
		c := newNATSClient(t, ts, ts.Srv.NATSURL(), json)
		var resp pb.QueryResponse
		c.mustCall(natstransport.SubjectQuery, &req, &resp)
		rows, err := protojson.Marshal(&pb.QueryResponse{Rows: resp.Rows})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"rows":[{"group":["ann"],"values":[1,1,"ann@x"]},{"group":["anna"],"values":[1,2,"anna@x"]},{"group":["bob"],"values":[1,3,"bob@x"]},{"group":["cy"],"values":[1,4,"cy@x"]}]}`
		if got := strings.ReplaceAll(string(rows), " ", ""); got != want {
			t.Fatalf("nats json %v: %s, want %s", json, got, want)
		}
		bad := &pb.QueryRequest{Query: &pb.Query{Type: "shop.User", Aggregate: &pb.Aggregate{GroupBy: []string{"nope"},
			Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}}}}
		st := c.call(natstransport.SubjectQuery, bad, &resp)
		wantNATSCode(t, st, codes.InvalidArgument)
		if !strings.Contains(st.GetMessage(), `"nope"`) {
			t.Fatalf("nats json %v bad group_by: %v", json, st)
		}
	}
}
