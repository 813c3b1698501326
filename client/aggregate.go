package client

import (
	"context"
	"fmt"
	"strings"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Aggregation is the answer of Aggregate: one row per group, ordered by
// group values, and the plan when the query asked for explain.
type Aggregation struct {
	// Rows hold, for each group, its values (parallel to the
	// aggregate's group_by) and its aggregates (parallel to its
	// functions), as JSON values: see pb.AggregateRow.
	Rows []*pb.AggregateRow
	Plan *pb.Plan
}

// Aggregate answers the aggregates of a over the matches of q (its type
// and filter; q.Aggregate is set to a), in one call on one snapshot:
//
//	fns, _ := client.ParseAggregates("count(),sum(score),avg(age)")
//	res, err := c.Aggregate(ctx, &pb.Query{Type: "shop.User", Filter: "age >= 30"},
//		&pb.Aggregate{GroupBy: []string{"team"}, Functions: fns})
func (c *Client) Aggregate(ctx context.Context, q *pb.Query, a *pb.Aggregate) (*Aggregation, error) {
	qa := &pb.Query{Type: q.GetType(), Where: q.GetWhere(), Filter: q.GetFilter(), Explain: q.GetExplain(), Aggregate: a}
	resp, err := c.api.Query(ctx, &pb.QueryRequest{Query: qa})
	if err != nil {
		return nil, asError(err)
	}
	return &Aggregation{Rows: resp.Rows, Plan: resp.Plan}, nil
}

// aggregateOps are the functions ParseAggregates knows, by name.
var aggregateOps = map[string]pb.AggregateOp{
	"count": pb.AggregateOp_AGGREGATE_OP_COUNT,
	"sum":   pb.AggregateOp_AGGREGATE_OP_SUM,
	"min":   pb.AggregateOp_AGGREGATE_OP_MIN,
	"max":   pb.AggregateOp_AGGREGATE_OP_MAX,
	"avg":   pb.AggregateOp_AGGREGATE_OP_AVG,
}

// ParseAggregates parses a comma-separated list of functions such as
// "count(),sum(score),avg(age)": count, sum, min, max or avg of a field
// path (count of none counts every match).
func ParseAggregates(s string) ([]*pb.AggregateFunction, error) {
	var out []*pb.AggregateFunction
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		open := strings.IndexByte(item, '(')
		if open < 0 || !strings.HasSuffix(item, ")") {
			return nil, fmt.Errorf("aggregate %q: want a function such as sum(score) or count()", item)
		}
		name := strings.ToLower(strings.TrimSpace(item[:open]))
		op, ok := aggregateOps[name]
		if !ok {
			return nil, fmt.Errorf("aggregate %q: unknown function %q (count, sum, min, max, avg)", item, name)
		}
		out = append(out, &pb.AggregateFunction{Op: op, Field: strings.TrimSpace(item[open+1 : len(item)-1])})
	}
	return out, nil
}

// AggregateName is the text of a function as ParseAggregates reads it:
// "sum(score)", "count()".
func AggregateName(f *pb.AggregateFunction) string {
	for name, op := range aggregateOps {
		if op == f.GetOp() {
			return name + "(" + f.GetField() + ")"
		}
	}
	return f.GetOp().String() + "(" + f.GetField() + ")"
}
