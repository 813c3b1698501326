package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
)

// conditionsHelp ends the long help of every write command.
const conditionsHelp = `

Conditions: --if-version N writes the input's one record only if the
stored record with its primary key is at version N (0: no such record;
get --versions prints versions). --condition JSON adds a condition, in the
protobuf JSON of protobase.v1.Condition (repeatable). Its target is one of
the input's records by its index from 0 ("record"), any record by a record
of its type holding its primary key ("key"), or a query ("query"); a
record or key is checked by "version" and/or "filter", a query by "count"
and/or "maxVersion":

  '{"record": 0, "version": "7"}'
  '{"key": {"@type": "type.googleapis.com/shop.User", "id": "2"}, "filter": "name = \"Bob\""}'
  '{"query": {"type": "shop.Order", "filter": "user_id = 2"}, "count": "0"}'

A write with conditions sends all its records as one batch (at most the
server's records per batch and message size; an input with none only
checks the conditions) and applies it only if every condition holds when
it commits. If one does not, nothing is applied and the command fails
with Aborted, naming the condition (numbered from 0, --if-version first)
and the version it found. See docs/write.md.`

// condition is one condition of a write and the flag that gave it.
type condition struct {
	cond *pb.Condition
	flag string
}

// onRecord reports whether the condition targets one of the batch's
// records, whose index is then an input record's.
func (c condition) onRecord() bool {
	_, ok := c.cond.GetTarget().(*pb.Condition_Record)
	return ok
}

// parseConditions turns --if-version and the --condition flags into the
// write's conditions, in that order; unmarshal resolves a key's record
// type in the server's schema.
func parseConditions(unmarshal protojson.UnmarshalOptions, o writeOptions) ([]condition, error) {
	var out []condition
	if o.ifVersion != nil {
		v := *o.ifVersion
		out = append(out, condition{
			cond: &pb.Condition{Target: &pb.Condition_Record{Record: 0}, Version: &v},
			flag: "--if-version " + strconv.FormatUint(v, 10),
		})
	}
	for i, js := range o.conditions {
		c := &pb.Condition{}
		if err := unmarshal.Unmarshal([]byte(js), c); err != nil {
			return nil, exitstatus.Usagef("--condition %d (%s): not a protobase.v1.Condition: %v", i+1, js, err)
		}
		out = append(out, condition{cond: c, flag: "--condition " + js})
	}
	return out, nil
}

// writeOnce writes the input's records as one batch with the conditions:
// they hold, or not, for one batch.
func (a *app) writeOnce(ctx context.Context, c *client.Client, spec writeSpec, o writeOptions,
	rt *recordType, in *input, conds []condition) error {
	recs, lines, err := readBatch(in, rt.limits, func(_ uint64, js []byte) (proto.Message, error) {
		rec, err := rt.encode(js)
		if err != nil {
			return nil, fmt.Errorf("not a valid %s: %w", rt.name, err)
		}
		return rec, nil
	})
	if err != nil {
		return err
	}
	if o.ifVersion != nil && len(recs) != 1 {
		return exitstatus.Usagef("--if-version applies to a write of one record; %s holds %d", in.name, len(recs))
	}
	b := client.Batch{Op: spec.op, Fields: o.fields, Add: o.add, Records: recs}
	for _, c := range conds {
		b.Conditions = append(b.Conditions, c.cond)
	}
	pos, err := c.Apply(ctx, b)
	if err != nil {
		return writeFailure(spec, a.conn.Addr, in.name, err, lines, 0, nil, conds)
	}
	n := len(recs)
	fmt.Fprintf(a.stderr, "%s %d %s at position %d; %d %s held\n", spec.done, n, plural(n, "record", "records"),
		pos, len(conds), plural(len(conds), "condition", "conditions"))
	return nil
}

// readBatch reads every record of the input for one batch, each line
// through record, refusing an input beyond the server's limits of one
// batch.
func readBatch(in *input, limits client.Limits, record func(lineNo uint64, js []byte) (proto.Message, error)) ([]proto.Message, *lineMap, error) {
	lr := newLineReader(in.r)
	lines := &lineMap{}
	var recs []proto.Message
	size := 0
	for lineNo := uint64(1); ; lineNo++ {
		raw, err := lr.next()
		if errors.Is(err, io.EOF) {
			return recs, lines, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", in.name, err)
		}
		js := bytes.TrimSpace(raw)
		if len(js) == 0 {
			continue
		}
		rec, err := record(lineNo, js)
		if err != nil {
			return nil, nil, fmt.Errorf("%s line %d: %w; nothing was sent", in.name, lineNo, err)
		}
		recs = append(recs, rec)
		lines.add(lineNo)
		size += proto.Size(rec)
		switch {
		case len(recs) > limits.MaxBatchRecords:
			return nil, nil, fmt.Errorf("the write is one batch, and %s holds more than the server's %d records per batch "+
				"(serve --max-batch-records); nothing was sent", in.name, limits.MaxBatchRecords)
		case size > limits.MaxMessageBytes:
			return nil, nil, fmt.Errorf("the write is one batch, and the records of %s up to line %d take more than "+
				"the server's message limit of %d bytes (serve --max-message-bytes); nothing was sent", in.name, lineNo, limits.MaxMessageBytes)
		}
	}
}
