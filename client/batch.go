package client

import (
	"context"
	"errors"
	"io"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Batch is one write batch applied on its own (Client.Apply): its
// operation and records, the conditions that must hold when it commits,
// and for a Patch the fields its records set and add.
type Batch struct {
	Op Op
	// Ops is the operation of each record, parallel to Records, when they
	// differ (then Op is ignored).
	Ops []Op
	// Records are sent as they are when they are *anypb.Any, packed into
	// one otherwise.
	Records []proto.Message
	// Conditions must all hold in the state the batch starts from; if one
	// fails nothing is applied and Apply's error has code Aborted, its
	// Write detail naming the condition and the version found.
	Conditions []*pb.Condition
	// Fields and Add are a Patch's: the field paths its records set (a
	// named field a record lacks is cleared), and the numeric fields whose
	// values are added to the stored ones.
	Fields, Add []string
}

// Apply applies b atomically on a Write stream of its own and returns once
// it is durable, with the position it committed at.
func (c *Client) Apply(ctx context.Context, b Batch) (uint64, error) {
	req := &pb.WriteStreamRequest{Op: b.Op, Ack: true, Conditions: b.Conditions, Fields: b.Fields, Add: b.Add, Ops: b.Ops}
	req.Records = make([]*anypb.Any, len(b.Records))
	for i, m := range b.Records {
		a, ok := m.(*anypb.Any)
		if !ok {
			var err error
			if a, err = anypb.New(m); err != nil {
				return 0, err
			}
		}
		req.Records[i] = a
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.api.Write(ctx)
	if err != nil {
		return 0, asError(err)
	}
	if err := st.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return 0, asError(err)
	}
	if err := st.CloseSend(); err != nil {
		return 0, asError(err)
	}
	resp, err := st.Recv()
	if err != nil {
		return 0, asError(err)
	}
	return resp.GetPosition(), nil
}
