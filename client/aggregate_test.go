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

// ParseAggregates takes any text without panicking, and what it takes
// prints back (AggregateName) to text it parses into the same functions.
func FuzzParseAggregates(f *testing.F) {
	for _, s := range []string{"count()", "count(), sum(id), min(email), avg(id)", "SUM( score )", "sum", "median(x)", "count(", "", ",", "sum())", "max(a(b))", " , count()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fns, err := client.ParseAggregates(s)
		if err != nil {
			if fns != nil {
				t.Fatalf("%q: functions %v with error %v", s, fns, err)
			}
			return
		}
		names := make([]string, len(fns))
		for i, fn := range fns {
			names[i] = client.AggregateName(fn)
		}
		again, err := client.ParseAggregates(strings.Join(names, ","))
		if err != nil {
			t.Fatalf("%q parsed, printed as %q, which does not parse: %v", s, names, err)
		}
		if len(again) != len(fns) {
			t.Fatalf("%q: %d functions, printed and parsed again %d", s, len(fns), len(again))
		}
		for i := range fns {
			if again[i].GetOp() != fns[i].GetOp() || again[i].GetField() != fns[i].GetField() {
				t.Fatalf("%q: function %d %v, printed and parsed again %v", s, i, fns[i], again[i])
			}
		}
	})
}
