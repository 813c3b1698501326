package grpc

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	labpb "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/grpcbuf"
	"github.com/protobase/protobase/internal/wire"
)

// Codec is the server's gRPC codec: protobuf, with internal/wire's hand
// decoders for the messages that arrive by the million (SearchRequest,
// QueryRequest, GetRequest and the write requests) and its hand encoders for the responses sent by the
// million (SearchResponse, ScanResponse) and of the unary reads (GetResponse,
// QueryResponse); each gives what the generated
// code gives, and hands the shapes it does not cover to it. A
// grpcbuf.Frame passes through as bytes (Lab.Echo's messages).
//
// The codec's name is "proto", so clients see ordinary protobuf.
type Codec struct {
	// MaxQueries, when positive, caps the queries of one SearchRequest:
	// decoded, each costs several hundred bytes, so a 63 MiB request of
	// 2.35 million lookups took 2 GB before the first query ran. A larger
	// request is refused before any query is decoded.
	MaxQueries int
}

var protoCodec = encoding.GetCodecV2("proto")

// Name implements encoding.CodecV2.
func (Codec) Name() string { return "proto" }

// Marshal implements encoding.CodecV2. SearchResponse, ScanResponse,
// GetResponse and QueryResponse are encoded by hand (see marshalHand). A grpcbuf.Held is its message's
// bytes followed by its release buffer (see sendHeld).
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	if h, ok := v.(*grpcbuf.Held); ok {
		if f, ok := h.Msg.(*grpcbuf.Frame); ok {
			return h.With(grpcbuf.FrameBuffer(f)), nil
		}
		out, err := c.Marshal(h.Msg)
		if err != nil {
			return nil, err
		}
		return h.Append(out), nil
	}
	if f, ok := v.(*grpcbuf.Frame); ok {
		return grpcbuf.MarshalFrame(f), nil
	}
	if out, ok := marshalHand(v); ok {
		return out, nil
	}
	return protoCodec.Marshal(v)
}

// Unmarshal implements encoding.CodecV2.
func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*grpcbuf.Frame); ok {
		grpcbuf.UnmarshalFrame(data, f)
		return nil
	}
	var err error
	switch req := v.(type) {
	case *pb.WriteRequest:
		err = wire.DecodeWriteRequest(ownCopy(data), req)
	case *pb.WriteStreamRequest:
		err = wire.DecodeWriteStreamRequest(ownCopy(data), req)
	case *SearchDecoder:
		err = c.unmarshalSearch(data, req.SearchRequest, &req.s)
	case *pb.SearchRequest:
		err = c.unmarshalSearch(data, req, nil)
	case *pb.QueryRequest:
		err = unmarshalQuery(data, req)
	case *pb.GetRequest:
		err = unmarshalGet(data, req)
	default:
		err = protoCodec.Unmarshal(data, v)
	}
	if err == nil {
		return nil
	}
	err = decodeError(v, err)
	if _, armed := decodeErrs.Load(v); armed || isUnaryRequest(v) {
		proto.Reset(v.(proto.Message))
		decodeErrs.Store(v, err)
		if !armed {
			unaryDecodeErrs.Add(1)
		}
		return nil
	}
	return err
}

// unmarshalSearch decodes a SearchRequest into req, reusing s's slabs
// when s is not nil.
func (c Codec) unmarshalSearch(data mem.BufferSlice, req *pb.SearchRequest, s *wire.SearchSlabs) error {
	buf := data.MaterializeToBuffer(grpcbuf.Pool)
	defer buf.Free()
	b := buf.ReadOnlyData()
	// One pass over the request counts its queries for both the limit and
	// the decoder (the count was two passes of its own).
	n, plain := wire.SearchRequestShape(b)
	if !plain {
		n = wire.CountQueries(b)
	}
	if c.MaxQueries > 0 && n > c.MaxQueries {
		return &overLimitError{fmt.Sprintf("%d queries in one request, more than the server's limit of %d (max search queries)", n, c.MaxQueries)}
	}
	if !plain {
		return proto.Unmarshal(b, req)
	}
	// The decoder keeps no reference to the bytes: strings are copied.
	return wire.DecodeSearchQueries(b, req, s, n)
}

// unmarshalQuery decodes a QueryRequest; the decoder keeps no reference
// to the bytes, so they are read from a pooled buffer.
func unmarshalQuery(data mem.BufferSlice, req *pb.QueryRequest) error {
	buf := data.MaterializeToBuffer(grpcbuf.Pool)
	defer buf.Free()
	return wire.DecodeQueryRequest(buf.ReadOnlyData(), req)
}

// unmarshalGet decodes a GetRequest; the decoder keeps no reference to
// the bytes, so they are read from a pooled buffer.
func unmarshalGet(data mem.BufferSlice, req *pb.GetRequest) error {
	buf := data.MaterializeToBuffer(grpcbuf.Pool)
	defer buf.Free()
	return wire.DecodeGetRequest(buf.ReadOnlyData(), req)
}

// overLimitError is a request the codec refuses for its size, not for its
// form: it decodes, but holds more than a limit allows.
type overLimitError struct{ msg string }

func (e *overLimitError) Error() string { return e.msg }

// decodeError names the message v that did not decode by its protobuf
// name (protobase.v1.SearchRequest, not the Go type that receives it),
// calling it malformed unless it was only over a limit.
func decodeError(v any, err error) error {
	name := "message"
	if m, ok := v.(proto.Message); ok {
		name = string(m.ProtoReflect().Descriptor().FullName())
	}
	var over *overLimitError
	if errors.As(err, &over) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return fmt.Errorf("malformed %s: %w", name, err)
}

// SearchDecoder receives SearchRequests one after another into the same
// messages: the queries of a request and their parts come from slabs that
// the next request decoded into it reuses, so a stream of batched lookups
// allocates nothing per query once the slabs have grown to its batches.
// Only the codec fills it; the caller must be done with every message of
// the previous request (the engine recycles it: engine.Recycler)
// before receiving the next into it.
//
// It is a proto.Message through the embedded request, so a stream that does
// not go through the codec (the REST gateway's) decodes into that.
type SearchDecoder struct {
	*pb.SearchRequest
	s wire.SearchSlabs
}

// NewSearchDecoder returns an empty decoder.
func NewSearchDecoder() *SearchDecoder {
	return &SearchDecoder{SearchRequest: new(pb.SearchRequest)}
}

// decodeErrs carries decode errors past gRPC to the handlers of streams.
// gRPC answers a codec error itself, with INTERNAL, and writes that status
// before the handler can return its own: a Search stream could not say
// INVALID_ARGUMENT and a write stream could not report the batches it had
// applied. So a handler arms the message it receives into (recvMsg), and
// for an armed message the codec stores its error here and reports success.
// Keys are message pointers; values are armed{} or the decode error.
var decodeErrs sync.Map

type armed struct{}

// unaryRequests holds the request message names of the unary methods of
// the services this package serves. A unary request is decoded by gRPC
// before any interceptor runs, so it cannot be armed: the codec stores
// its error unasked and UnaryInterceptor, which every unary call passes
// through, takes it back (takeDecodeErr) and answers INVALID_ARGUMENT.
var unaryRequests = func() map[protoreflect.FullName]bool {
	names := map[protoreflect.FullName]bool{}
	for _, fd := range []protoreflect.FileDescriptor{pbgrpc.File_protobase_v1_service_proto, labpb.File_protobase_lab_v1_lab_proto} {
		svcs := fd.Services()
		for i := range svcs.Len() {
			ms := svcs.Get(i).Methods()
			for j := range ms.Len() {
				if m := ms.Get(j); !m.IsStreamingClient() && !m.IsStreamingServer() {
					names[m.Input().FullName()] = true
				}
			}
		}
	}
	return names
}()

func isUnaryRequest(v any) bool {
	m, ok := v.(proto.Message)
	return ok && unaryRequests[m.ProtoReflect().Descriptor().FullName()]
}

// unaryDecodeErrs counts the decode errors the codec stored for unary
// requests and takeDecodeErr has not taken, so that the unary calls of a
// server that stores none (every call, as a rule) skip the map. The codec
// decodes a request in the goroutine that then runs the interceptor, so a
// call whose request stored an error finds the count above zero.
var unaryDecodeErrs atomic.Int64

// takeDecodeErr returns (and forgets) the decode error the codec stored
// for req, as INVALID_ARGUMENT, or nil.
func takeDecodeErr(req any) error {
	if unaryDecodeErrs.Load() == 0 || !isUnaryRequest(req) {
		return nil
	}
	if v, ok := decodeErrs.LoadAndDelete(req); ok {
		unaryDecodeErrs.Add(-1)
		if derr, ok := v.(error); ok {
			return apierror.Wrap(apierror.InvalidArgument, derr)
		}
	}
	return nil
}

// decodeStream arms every message a server-streaming call receives: its
// one request is read by the generated handler, out of our handlers'
// reach, so a malformed one is INVALID_ARGUMENT here and not INTERNAL.
type decodeStream struct{ grpc.ServerStream }

func (d decodeStream) RecvMsg(m any) error {
	if pm, ok := m.(proto.Message); ok {
		if err := recvMsg(d.ServerStream, pm); err != nil {
			return toStatus(err)
		}
		return nil
	}
	return d.ServerStream.RecvMsg(m)
}

// recvMsg receives the next message of st into m; a message that does not
// decode (nested deeper than protobuf's limit, invalid UTF-8 in a string)
// is the client's error, INVALID_ARGUMENT, and the stream's handler still
// chooses how to end the stream.
func recvMsg(st grpc.ServerStream, m proto.Message) error {
	decodeErrs.Store(m, armed{})
	err := st.RecvMsg(m)
	v, _ := decodeErrs.LoadAndDelete(m)
	if err != nil {
		return err
	}
	if derr, ok := v.(error); ok {
		return apierror.Wrap(apierror.InvalidArgument, derr)
	}
	return nil
}

// marshalHand encodes v with internal/wire's hand encoders, into a buffer
// of grpcbuf.Pool sized exactly beforehand (grpc-go's default pool zeroes
// every buffer), if v is a message with a hand encoder and of a shape it
// covers; ok is false otherwise.
func marshalHand(v any) (out mem.BufferSlice, ok bool) {
	var size int
	switch m := v.(type) {
	case *pb.SearchResponse:
		if size, ok = wire.SizeSearchResponse(m); ok {
			out = grpcbuf.Encoded(m, size, wire.AppendSearchResponse)
		}
	case *pb.ScanResponse:
		if size, ok = wire.SizeScanResponse(m); ok {
			out = grpcbuf.Encoded(m, size, wire.AppendScanResponse)
		}
	case *pb.GetResponse:
		if size, ok = wire.SizeGetResponse(m); ok {
			out = grpcbuf.Encoded(m, size, wire.AppendGetResponse)
		}
	case *pb.QueryResponse:
		if size, ok = wire.SizeQueryResponse(m); ok {
			out = grpcbuf.Encoded(m, size, wire.AppendQueryResponse)
		}
	}
	return out, ok
}

// ownCopy returns a copy of the bytes of a write request, which its
// decoder keeps (its records' values point into it). It is the one copy:
// the transport's buffers are freed once the codec returns, and a
// contiguous copy made first (MaterializeToBuffer) was a second copy of
// every request, as large as the request, held at once by every stream
// decoding one.
func ownCopy(data mem.BufferSlice) []byte {
	own := make([]byte, data.Len())
	data.CopyTo(own)
	return own
}
