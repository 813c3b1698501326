package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/transport/schemajson"
)

// codec is the gateway's one marshaler: protojson with the runtime-schema
// resolver in both directions, and a decoder that reads one bounded JSON
// object per message. Unknown JSON fields are rejected, as unknown
// protobuf fields are.
type codec struct {
	runtime.JSONPb
	max  int
	res  *schemajson.Resolver
	hold TranscodeHold // nil: none
}

var _ runtime.Marshaler = (*codec)(nil)

// TranscodeHold holds n bytes of the server's budget, the memory JSON
// takes to convert what (a request object, a response), until the Hold is
// released (engine.Engine.TranscodeHold).
type TranscodeHold func(ctx context.Context, n int64, what string) (engine.Hold, error)

func newCodec(res *schemajson.Resolver, maxBytes int, hold TranscodeHold) *codec {
	return &codec{
		JSONPb: runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{Resolver: res},
			UnmarshalOptions: protojson.UnmarshalOptions{Resolver: res},
		},
		max:  maxBytes,
		res:  res,
		hold: hold,
	}
}

// Marshal renders v as JSON, as marshal does. A unary call's response
// arrives as a *requestMessage (withRequest), so that a wait for the
// budget ends when its client goes away; anything else (an error status)
// waits with no request to end it.
func (c *codec) Marshal(v any) ([]byte, error) {
	if rm, ok := v.(*requestMessage); ok {
		return c.marshal(rm.ctx, rm.m)
	}
	if m, ok := v.(proto.Message); ok {
		return c.marshal(context.Background(), m)
	}
	return c.JSONPb.Marshal(v)
}

// marshal renders m as JSON, holding what that takes of the budget while
// it does (schemajson.Resolver.EncodeCost): a record of many small
// elements takes a hundred times its bytes. The wait for the budget ends
// with ctx, the request's.
func (c *codec) marshal(ctx context.Context, m proto.Message) ([]byte, error) {
	h, err := c.holdFor(ctx, c.res.EncodeCost(m), "the response")
	if err != nil {
		return nil, err
	}
	defer h.Release()
	return c.JSONPb.Marshal(m)
}

// requestMessage is a unary call's response with its request's context.
// grpc-gateway hands Marshal the response alone; its response rewriter,
// which sees the context, wraps the response in this (withRequest).
type requestMessage struct {
	ctx context.Context
	m   proto.Message
}

// withRequest is the gateway's response rewriter (runtime.ForwardResponseRewriter).
func withRequest(ctx context.Context, m proto.Message) (any, error) {
	return &requestMessage{ctx: ctx, m: m}, nil
}

// holdFor holds n bytes of the budget, what converting what takes, until
// the Hold is released; a wait for them ends with ctx.
func (c *codec) holdFor(ctx context.Context, n int64, what string) (engine.Hold, error) {
	if c.hold == nil {
		return engine.Hold{}, nil
	}
	return c.hold(ctx, n, what)
}

// NewDecoder returns a decoder of the JSON objects of r. When r is the
// request body (always, through Gateway.ServeHTTP), an oversized object is
// recorded on it for the error handler.
func (c *codec) NewDecoder(r io.Reader) runtime.Decoder {
	b, _ := r.(*body)
	return &decoder{vr: newValueReader(r, c.max), body: b, opts: c.UnmarshalOptions, c: c}
}

// body wraps a request body so the error handler can tell an oversized
// message (HTTP 413) from malformed JSON (HTTP 400): the generated gateway
// code turns every decode error into INVALID_ARGUMENT text. It carries
// the request's context, which ends a decoder's wait for the budget when
// the client goes away.
type body struct {
	io.ReadCloser
	ctx      context.Context
	tooLarge atomic.Bool
}

// decoder decodes successive JSON objects into messages.
type decoder struct {
	vr   *valueReader
	body *body
	opts protojson.UnmarshalOptions
	c    *codec
	n    uint64 // objects decoded
}

// Decode reads the next object into v; io.EOF at the end of the body.
func (d *decoder) Decode(v any) error {
	b, err := d.vr.next()
	if err != nil {
		if errors.Is(err, errTooLarge) && d.body != nil {
			d.body.tooLarge.Store(true)
		}
		return err
	}
	d.n++
	m, ok := v.(proto.Message)
	if !ok {
		return json.Unmarshal(b, v)
	}
	h, err := d.hold(b)
	if err != nil {
		return fmt.Errorf("message %d: %w", d.n-1, err)
	}
	defer h.Release()
	if err := d.opts.Unmarshal(b, m); err != nil {
		return fmt.Errorf("message %d: %w", d.n-1, err)
	}
	return nil
}

// decodeBatch decodes the next write batch (a *pb.WriteRequest or a
// *pb.WriteStreamRequest) with schemajson.Unmarshal, whose errors name the
// record to blame. Errors are *apierror.Error; the writer fills in the batch
// and the counts (engine.Writer.Abort).
func (d *decoder) decodeBatch(m proto.Message) error {
	b, err := d.vr.next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		e := apierror.Wrap(apierror.InvalidArgument, err)
		if errors.Is(err, errTooLarge) {
			if d.body != nil {
				d.body.tooLarge.Store(true)
			}
			e.Code = apierror.ResourceExhausted
		}
		return e
	}
	d.n++
	h, err := d.hold(b)
	if err != nil {
		return err
	}
	defer h.Release()
	return schemajson.Unmarshal(d.opts, b, m)
}

// hold holds what parsing the JSON object b takes of the budget
// (schemajson.DecodeCost), until the Hold is released; a wait for it ends
// with the request's context.
func (d *decoder) hold(b []byte) (engine.Hold, error) {
	ctx := context.Background()
	if d.body != nil {
		ctx = d.body.ctx
	}
	return d.c.holdFor(ctx, schemajson.DecodeCost(b), "the request object")
}
