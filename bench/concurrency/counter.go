package concurrency

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// counterState is one target's counter and the increments acknowledged
// on it, which check compares with the counter's value.
type counterState struct {
	id    string
	added atomic.Int64
}

// newCounter inserts a counter at 0 under a fresh id.
func newCounter(ctx context.Context, t *bench.Target) (*counterState, error) {
	c := &counterState{id: fmt.Sprintf("c%d", time.Now().UnixNano())}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, c.id)
	_, err := t.Client.Apply(ctx, client.Batch{Op: client.Insert, Records: []proto.Message{&anypb.Any{TypeUrl: counterURL, Value: b}}})
	if err != nil {
		return nil, fmt.Errorf("insert counter: %w", err)
	}
	return c, nil
}

// check fails unless the counter holds every increment acknowledged.
func (c *counterState) check(ctx context.Context, t *bench.Target) error {
	recs, err := t.Client.Get(ctx, "protobase_lab.concurrency.Counter", c.id)
	if err != nil {
		return fmt.Errorf("read counter %s: %w", c.id, err)
	}
	if len(recs) != 1 {
		return fmt.Errorf("read counter %s: %d records", c.id, len(recs))
	}
	var n uint64
	b := recs[0].GetValue()
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return fmt.Errorf("counter %s: malformed record", c.id)
		}
		b = b[l:]
		if num == 2 && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return fmt.Errorf("counter %s: malformed record", c.id)
			}
			n = v
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return fmt.Errorf("counter %s: malformed record", c.id)
		}
		b = b[m:]
	}
	if want := c.added.Load(); int64(n) != want { //nolint:gosec // a count
		return fmt.Errorf("counter %s holds %d after %d increments were acknowledged", c.id, n, want)
	}
	return nil
}

// counter is g.Clients clients adding 1 to c's counter, each on its own
// Write stream, one acknowledged patch at a time. With set, they update
// it to 1 instead: single-record updates of one key, the ceiling of the
// adds (c then counts nothing, and check does not apply).
func (g *Experiment) counter(t *bench.Target, c *counterState, set bool) bench.Workload {
	rec := counterAdd(c.id)
	req := func() *pb.WriteStreamRequest {
		if set {
			return &pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_UPDATE, Ack: true, Records: []*anypb.Any{rec}}
		}
		return &pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_PATCH, Add: []string{"n"}, Ack: true, Records: []*anypb.Any{rec}}
	}
	return runClients(g.Clients, func(ctx context.Context, _ int, more func() bool) (int64, error) {
		st, err := t.API.Write(ctx)
		if err != nil {
			return 0, err
		}
		req := req()
		var n int64
		for more() {
			if err := st.Send(req); err != nil {
				return 0, bench.StreamError(st, "send", err)
			}
			if _, err := st.Recv(); err != nil {
				return 0, fmt.Errorf("add: %w", err)
			}
			n++
			if !set {
				c.added.Add(1)
			}
		}
		if err := st.CloseSend(); err != nil {
			return 0, err
		}
		_, err = bench.Drain(st, new(pb.WriteStreamResponse))
		return n, err
	})
}
