package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
)

// aggOptions are query's aggregate flags.
type aggOptions struct {
	groupBy []string
	funcs   string
}

// aggregate prints the aggregates of o's query, one JSON object per group.
func (a *app) aggregate(ctx context.Context, o *readOptions, ag *aggOptions) error {
	if o.format != "jsonl" {
		return exitstatus.Usagef("--format %q: aggregates print as jsonl", o.format)
	}
	text := ag.funcs
	if text == "" {
		text = "count()"
	}
	fns, err := client.ParseAggregates(text)
	if err != nil {
		return exitstatus.UsageError(fmt.Errorf("--agg: %w", err))
	}
	q, err := o.query()
	if err != nil {
		return err
	}
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Aggregate(ctx, q, &pb.Aggregate{GroupBy: ag.groupBy, Functions: fns})
	if err != nil {
		return callError("query", a.conn.Addr, err)
	}
	if o.explain && res.Plan != nil {
		fmt.Fprintf(a.stderr, "plan: %s\n", res.Plan.GetText())
	}
	names := make([]string, 0, len(ag.groupBy)+len(fns))
	names = append(names, ag.groupBy...)
	for _, f := range fns {
		names = append(names, client.AggregateName(f))
	}
	w := bufio.NewWriter(a.stdout)
	for _, row := range res.Rows {
		if err := writeAggRow(w, names, append(row.Group, row.Values...)); err != nil {
			return err
		}
	}
	return w.Flush()
}

// writeAggRow writes one row as a JSON object whose keys keep the order of
// names: group fields first, then functions. A name given twice (a field
// grouped by twice, a function asked twice) has the same value both times
// and is written once: a JSON object's keys are distinct.
func writeAggRow(w *bufio.Writer, names []string, vals []*structpb.Value) error {
	line := []byte{'{'}
	for i, name := range names {
		if slices.Contains(names[:i], name) {
			continue
		}
		if i > 0 {
			line = append(line, ',')
		}
		k, err := json.Marshal(name)
		if err != nil {
			return err
		}
		var v any
		if i < len(vals) {
			v = vals[i].AsInterface()
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		line = append(append(append(line, k...), ':'), b...)
	}
	_, err := w.Write(append(line, '}', '\n'))
	return err
}
