package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func TestAggregate(t *testing.T) {
	c := startSearchServer(t, 10)
	fns, err := client.ParseAggregates("count(), sum(id), min(email), avg(id)")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Aggregate(context.Background(), &pb.Query{Type: "shop.User", Filter: "id >= 4", Explain: true},
		&pb.Aggregate{Functions: fns})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 {
		t.Fatalf("rows: %v", res.Rows)
	}
	v := res.Rows[0].Values
	if v[0].GetNumberValue() != 6 || v[1].GetNumberValue() != 39 || v[2].GetStringValue() != email(4) || v[3].GetNumberValue() != 6.5 {
		t.Fatalf("values: %v", v)
	}
	if !strings.Contains(res.Plan.GetText(), "aggregate: count(), sum(id), min(email), avg(id)") {
		t.Fatalf("plan: %s", res.Plan.GetText())
	}
	_, err = c.Aggregate(context.Background(), &pb.Query{Type: "shop.User"}, &pb.Aggregate{GroupBy: []string{"id.x"}, Functions: fns})
	var ce *client.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "id.x") {
		t.Fatalf("bad group_by: %v", err)
	}
	for _, bad := range []string{"sum", "median(x)", "count(", ""} {
		if _, err := client.ParseAggregates(bad); err == nil {
			t.Errorf("ParseAggregates(%q) took it", bad)
		}
	}
	if got := client.AggregateName(fns[1]); got != "sum(id)" {
		t.Errorf("AggregateName: %s", got)
	}
}
