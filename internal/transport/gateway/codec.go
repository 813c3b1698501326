package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/transport/schemajson"
)

// codec is the gateway's one marshaler: protojson with the runtime-schema
// resolver in both directions, and a decoder that reads one bounded JSON
// object per message. Unknown JSON fields are rejected, as unknown
// protobuf fields are.
type codec struct {
	runtime.JSONPb
	max int
}

var _ runtime.Marshaler = (*codec)(nil)

func newCodec(res *schemajson.Resolver, maxBytes int) *codec {
	return &codec{
		JSONPb: runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{Resolver: res},
			UnmarshalOptions: protojson.UnmarshalOptions{Resolver: res},
		},
		max: maxBytes,
	}
}

// NewDecoder returns a decoder of the JSON objects of r. When r is the
// request body (always, through Gateway.ServeHTTP), an oversized object is
// recorded on it for the error handler.
func (c *codec) NewDecoder(r io.Reader) runtime.Decoder {
	b, _ := r.(*body)
	return &decoder{vr: newValueReader(r, c.max), body: b, opts: c.UnmarshalOptions}
}

// body wraps a request body so the error handler can tell an oversized
// message (HTTP 413) from malformed JSON (HTTP 400): the generated gateway
// code turns every decode error into INVALID_ARGUMENT text.
type body struct {
	io.ReadCloser
	tooLarge atomic.Bool
}

// decoder decodes successive JSON objects into messages.
type decoder struct {
	vr   *valueReader
	body *body
	opts protojson.UnmarshalOptions
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
	return schemajson.Unmarshal(d.opts, b, m)
}
