package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/protobase/protobase/server"
)

// Aggregates travel over REST as JSON: rows of group values and
// aggregate values, integers as numbers, absent values as null.
func TestAggregateOverREST(t *testing.T) {
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
}
