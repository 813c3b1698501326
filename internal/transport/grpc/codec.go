package grpc

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	labpb "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/apiwire"
	"github.com/protobase/protobase/internal/grpcbuf"
)

// Codec is the server's gRPC codec: protobuf, with fast decoders for the
// messages that arrive by the million (SearchRequest, and the write
// requests: writecodec.go) and hand encoders for the responses
// (encode.go). A grpcbuf.Frame passes through as bytes (Lab.Echo's
// messages).
//
// Decoding a batch of point lookups with the generated code allocates six
// messages per query (Query, Expr, its oneof wrapper, Comparison, Value and
// its wrapper) plus two strings; on a Search stream of batched lookups that
// was the server's largest cost after the storage read itself. The fast
// decoder allocates each kind of message once per request, in slabs, and
// reuses the type and field strings across queries. It understands the
// common shape — a query whose filter is a single comparison with a scalar
// operand — and hands every other query's bytes to proto.Unmarshal, so the
// result is always what proto.Unmarshal would produce (FuzzDecodeSearch
// checks it): same messages, same errors.
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

// Marshal implements encoding.CodecV2. SearchResponse and ScanResponse
// are encoded by hand (see marshalFast). A grpcbuf.Held is its message's
// bytes followed by its release buffer (see sendHeld).
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	if h, ok := v.(*grpcbuf.Held); ok {
		out, err := c.Marshal(h.Msg)
		if err != nil {
			return nil, err
		}
		return append(out, grpcbuf.Releaser(h.Pool)), nil
	}
	if f, ok := v.(*grpcbuf.Frame); ok {
		return grpcbuf.MarshalFrame(f), nil
	}
	if out, ok := marshalFast(v); ok {
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
		err = decodeWrite(data, func(b []byte) error { return decodeWriteRequest(b, req) })
	case *pb.WriteStreamRequest:
		err = decodeWrite(data, func(b []byte) error { return decodeWriteStreamRequest(b, req) })
	case *SearchDecoder:
		err = c.unmarshalSearch(data, req.SearchRequest, &req.s)
	case *pb.SearchRequest:
		err = c.unmarshalSearch(data, req, nil)
	default:
		err = protoCodec.Unmarshal(data, v)
	}
	if err == nil {
		return nil
	}
	err = decodeError(v, err)
	if _, ok := decodeErrs.Load(v); ok || isUnaryRequest(v) {
		proto.Reset(v.(proto.Message))
		decodeErrs.Store(v, err)
		return nil
	}
	return err
}

// unmarshalSearch decodes a SearchRequest into req, reusing s's slabs
// when s is not nil.
func (c Codec) unmarshalSearch(data mem.BufferSlice, req *pb.SearchRequest, s *slabs) error {
	buf := data.MaterializeToBuffer(grpcbuf.Pool)
	defer buf.Free()
	b := buf.ReadOnlyData()
	// One pass over the request counts its queries for both the limit and
	// the decoder (the count was two passes of its own).
	n, plain := searchShape(b)
	if !plain {
		n = countQueries(b)
	}
	if c.MaxQueries > 0 && n > c.MaxQueries {
		return &overLimitError{fmt.Sprintf("%d queries in one request, more than the server's limit of %d (max search queries)", n, c.MaxQueries)}
	}
	if !plain {
		return proto.Unmarshal(b, req)
	}
	// decodeQueries keeps no reference to the bytes: strings are copied.
	return decodeQueries(b, req, s, n)
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
	s slabs
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
	for _, fd := range []protoreflect.FileDescriptor{pb.File_protobase_v1_protobase_proto, labpb.File_protobase_lab_v1_lab_proto} {
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

// takeDecodeErr returns (and forgets) the decode error the codec stored
// for req, as INVALID_ARGUMENT, or nil.
func takeDecodeErr(req any) error {
	if !isUnaryRequest(req) {
		return nil
	}
	if v, ok := decodeErrs.LoadAndDelete(req); ok {
		if derr, ok := v.(error); ok {
			return apierror.Wrap(codes.InvalidArgument, derr)
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
		return apierror.Wrap(codes.InvalidArgument, derr)
	}
	return nil
}

// slabs hands out the messages of one request from per-kind arrays. Reused
// for a later request (decodeSearchInto), each message is reset before it
// is handed out again, so what the decoder does not set is empty, as
// proto.Unmarshal leaves it.
type slabs struct {
	ptrs    []*pb.Query // the request's Queries, reused as its backing array
	queries []pb.Query
	exprs   []pb.Expr
	cmps    []pb.Comparison
	vals    []pb.Value
	wrapCmp []pb.Expr_Cmp
	ints    []pb.Value_Int
	uints   []pb.Value_Uint
	strs    []pb.Value_String_
	byts    []pb.Value_Bytes
	bools   []pb.Value_Bool
	n       int // queries decoded so far
	lastTyp string
	lastFld string
}

// countQueries counts the queries of SearchRequest bytes b, up to the
// first field it cannot skip.
func countQueries(b []byte) int {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, b[l:])
		if m < 0 {
			break
		}
		if num == apiwire.SearchRequestQueries {
			n++
		}
		b = b[l+m:]
	}
	return n
}

// decodeSearch decodes b into req, as proto.Unmarshal would.
func decodeSearch(b []byte, req *pb.SearchRequest) error {
	return decodeSearchInto(b, req, nil)
}

// decodeSearchInto decodes b into req, as proto.Unmarshal would, taking
// the messages from s (nil: new slabs) and growing it as needed.
func decodeSearchInto(b []byte, req *pb.SearchRequest, s *slabs) error {
	n, plain := searchShape(b)
	if !plain {
		return proto.Unmarshal(b, req)
	}
	return decodeQueries(b, req, s, n)
}

// searchShape counts the queries of SearchRequest bytes b and reports
// whether b holds nothing else: only well-formed queries fields, the
// shape decodeQueries takes. Anything unusual (unknown fields, wrong
// wire types, truncation) is left to the generated decoder.
func searchShape(b []byte) (int, bool) {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 || num != apiwire.SearchRequestQueries || typ != protowire.BytesType {
			return 0, false
		}
		b = b[l:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, false
		}
		b = b[m:]
		n++
	}
	return n, true
}

// decodeQueries decodes b, of the shape searchShape accepted with n
// queries, into req, as proto.Unmarshal would.
func decodeQueries(b []byte, req *pb.SearchRequest, s *slabs, n int) error {
	req.Reset()
	if n == 0 {
		return nil
	}
	if s == nil {
		s = new(slabs)
	}
	s.reset(n)
	req.Queries = s.ptrs[:n]
	for rest := b; len(rest) > 0; {
		_, _, l := protowire.ConsumeTag(rest)
		rest = rest[l:]
		qb, m := protowire.ConsumeBytes(rest)
		rest = rest[m:]
		q := &s.queries[s.n]
		// Zeroed as new, not Reset: Reset also stores the message's type
		// info with an atomic exchange, a full memory barrier on x86, and
		// three per query showed in the profile. The runtime stores it
		// on first use, as for any new message.
		*q = pb.Query{}
		if !s.query(qb, q) {
			q.Reset()
			if err := proto.Unmarshal(qb, q); err != nil {
				req.Reset()
				return err
			}
		}
		req.Queries[s.n] = q
		s.n++
	}
	return nil
}

// reset readies s for a request of n queries: the arrays are reused when
// large enough, else replaced (the messages of an earlier request decoded
// into smaller ones are not touched again).
func (s *slabs) reset(n int) {
	s.n = 0
	if cap(s.queries) < n {
		*s = slabs{
			ptrs:    make([]*pb.Query, n),
			queries: make([]pb.Query, n),
			exprs:   make([]pb.Expr, n),
			cmps:    make([]pb.Comparison, n),
			vals:    make([]pb.Value, n),
			wrapCmp: make([]pb.Expr_Cmp, n),
			lastTyp: s.lastTyp,
			lastFld: s.lastFld,
		}
	}
}

// query decodes the common shape of a query (apiwire.ReadQuery's) into
// q; false means b is something else and q must be decoded by
// proto.Unmarshal.
func (s *slabs) query(b []byte, q *pb.Query) bool {
	var wq apiwire.Query
	w := &wq
	if !apiwire.ReadQuery(b, w) {
		return false
	}
	if len(w.Type) > 0 {
		q.Type = shared(w.Type, &s.lastTyp)
	}
	q.Limit, q.KeysOnly, q.Explain, q.Count = w.Limit, w.KeysOnly, w.Explain, w.Count
	if w.Where {
		q.Where = s.where(&w.Cmp)
	}
	return true
}

// where returns an Expr holding comparison c.
func (s *slabs) where(c *apiwire.Comparison) *pb.Expr {
	cmp := &s.cmps[s.n]
	*cmp = pb.Comparison{Op: pb.Op(c.Op)} // as new (see decodeSearchInto)
	if len(c.Field) > 0 {
		cmp.Field = shared(c.Field, &s.lastFld)
	}
	if c.HasValue {
		cmp.Value = s.value(&c.Value)
	}
	e := &s.exprs[s.n]
	w := &s.wrapCmp[s.n]
	w.Cmp = cmp
	e.Expr = w
	return e
}

// value returns operand o as s.vals[s.n].
func (s *slabs) value(o *apiwire.Operand) *pb.Value {
	v := &s.vals[s.n]
	*v = pb.Value{} // as new (see decodeSearchInto)
	switch o.Num {
	case apiwire.ValueInt:
		if s.ints == nil {
			s.ints = make([]pb.Value_Int, len(s.queries))
		}
		w := &s.ints[s.n]
		w.Int = int64(o.X) //nolint:gosec // int64 travels as its two's-complement varint
		v.Kind = w
	case apiwire.ValueUint:
		if s.uints == nil {
			s.uints = make([]pb.Value_Uint, len(s.queries))
		}
		w := &s.uints[s.n]
		w.Uint = o.X
		v.Kind = w
	case apiwire.ValueBool:
		if s.bools == nil {
			s.bools = make([]pb.Value_Bool, len(s.queries))
		}
		w := &s.bools[s.n]
		w.Bool = o.X != 0
		v.Kind = w
	case apiwire.ValueString:
		if s.strs == nil {
			s.strs = make([]pb.Value_String_, len(s.queries))
		}
		w := &s.strs[s.n]
		w.String_ = string(o.S)
		v.Kind = w
	default: // apiwire.ValueBytes, the only other operand ReadQuery takes
		if s.byts == nil {
			s.byts = make([]pb.Value_Bytes, len(s.queries))
		}
		w := &s.byts[s.n]
		// proto.Unmarshal gives an empty, non-nil slice for empty bytes.
		w.Bytes = append(make([]byte, 0, len(o.S)), o.S...)
		v.Kind = w
	}
	return v
}

// shared returns b as a string, reusing *last when equal, so a batch of
// queries on one type shares one string.
func shared(b []byte, last *string) string {
	if string(b) != *last {
		*last = string(b)
	}
	return *last
}
