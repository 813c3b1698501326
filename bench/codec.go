package bench

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/internal/grpcbuf"
)

// The lab's client codec keeps the client out of the measurement. Requests
// are encoded once, before the clock starts, into frames that every send
// reuses; responses are not materialized but tallied with protowire
// (completions, errors, records), which is all a workload needs to know
// that every query was answered. Any other message goes through the
// standard proto codec. The codec's name is "proto", so the server sees
// ordinary protobuf.
//
// A Frame's bytes must never change once sent: grpc-go keeps a reference
// to them until its writer has put them on the wire, after Send returns.

// Frame is a message already encoded. Sent on a stream opened with
// CallCodec, it goes on the wire as it is.
type Frame []byte

// FrameCycle sends pre-encoded frames in turn, starting over after the
// last: a workload's requests without encoding or allocating per send.
type FrameCycle struct {
	Frames []Frame
	next   int // index in Frames of the frame Send sends next
}

// Send sends the next frame on st, a stream opened with CallCodec. A
// failed send reports the stream's status, which says why.
func (c *FrameCycle) Send(st grpc.ClientStream) error {
	if err := st.SendMsg(&c.Frames[c.next]); err != nil {
		return StreamError(st, "send", err)
	}
	c.next++
	if c.next == len(c.Frames) {
		c.next = 0
	}
	return nil
}

// Drain receives into m until the stream ends and returns how many
// messages came; the end's status is the error, nil for OK.
func Drain(st grpc.ClientStream, m any) (uint64, error) {
	var n uint64
	for {
		err := st.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// EncodeFrame encodes m once.
func EncodeFrame(m proto.Message) (Frame, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return Frame(b), nil
}

// searchTally counts what SearchResponses carried. Unmarshalling into a
// tally adds to it.
type searchTally struct {
	responses uint64
	done      uint64
	errors    uint64
	records   uint64
	firstErr  string // message of the first query error seen
}

// answered is the number of queries finished, well or not.
func (t *searchTally) answered() uint64 { return t.done + t.errors }

// add tallies one encoded SearchResponse.
func (t *searchTally) add(b []byte) error {
	t.responses++
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch num {
		case 1: // results: count their records (field 2)
			recs, err := countField(v, 2)
			if err != nil {
				return err
			}
			t.records += recs
		case 2: // done
			t.done++
		case 3: // errors
			t.errors++
			if t.firstErr == "" {
				t.firstErr = queryErrorMessage(v)
			}
		}
	}
	return nil
}

// countField counts the occurrences of field num in message b.
func countField(b []byte, num protowire.Number) (uint64, error) {
	var c uint64
	for len(b) > 0 {
		f, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(f, typ, b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
		if f == num {
			c++
		}
	}
	return c, nil
}

// queryErrorMessage pulls the message (field 3) out of a QueryError.
func queryErrorMessage(b []byte) string {
	for len(b) > 0 {
		f, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "malformed query error"
		}
		b = b[n:]
		if f == 3 && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			return string(v)
		}
		n = protowire.ConsumeFieldValue(f, typ, b)
		if n < 0 {
			return "malformed query error"
		}
		b = b[n:]
	}
	return ""
}

// labCodec implements encoding.CodecV2 (see the comment at the top).
type labCodec struct{ std encoding.CodecV2 }

// CallCodec makes a call use the lab's client codec (see the comment at
// the top): a stream opened with it sends Frames as they are.
func CallCodec() grpc.CallOption {
	return grpc.ForceCodecV2(labCodec{std: encoding.GetCodecV2("proto")})
}

func (c labCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*Frame); ok {
		return mem.BufferSlice{mem.SliceBuffer(*f)}, nil
	}
	return c.std.Marshal(v)
}

// WireTally is a response that a workload tallies from its encoding
// instead of decoding it (see the comment at the top): received on a
// stream opened with CallCodec, its AddWire gets each message's bytes,
// valid during the call only.
type WireTally interface {
	AddWire(b []byte) error
}

// AddWire implements WireTally.
func (t *searchTally) AddWire(b []byte) error { return t.add(b) }

func (c labCodec) Unmarshal(data mem.BufferSlice, v any) error {
	t, ok := v.(WireTally)
	if !ok {
		return c.std.Unmarshal(data, v)
	}
	if len(data) == 1 {
		return t.AddWire(data[0].ReadOnlyData())
	}
	// grpcbuf.Pool, not grpc-go's default: the default zeroes each buffer
	// it hands out, and MaterializeToBuffer overwrites it all anyway (the
	// zeroing was half of a watcher's receiving in the watch experiment).
	buf := data.MaterializeToBuffer(grpcbuf.Pool)
	defer buf.Free()
	return t.AddWire(buf.ReadOnlyData())
}

func (labCodec) Name() string { return "proto" }
