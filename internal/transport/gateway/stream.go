package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// httpStream is a gRPC server stream over one HTTP exchange, so the REST
// gateway can call the gRPC adapter's stream methods unchanged: RecvMsg
// decodes the next JSON object of the request body, Send writes one line of
// newline-delimited JSON to the response and flushes it.
//
// It implements grpc.ClientStreamingServer, grpc.ServerStreamingServer and
// grpc.BidiStreamingServer for Req and Res. Like a gRPC stream it is not
// safe for concurrent sends or concurrent receives (the service methods do
// neither); one receiver and one sender may run at once on HTTP/2 or on
// HTTP/1.1 with full duplex enabled.
type httpStream[Req, Res any] struct {
	g   *Gateway
	ctx context.Context
	w   http.ResponseWriter
	r   *http.Request
	dec *decoder

	// recvMu is held while RecvMsg reads the body, and ended is set once
	// the method has returned: a write stream reads one request ahead on a
	// goroutine of its own, which may still be reading when the method
	// returns, and the body must not be read once the HTTP handler has
	// (its deadlines are the finished exchange's).
	recvMu sync.Mutex
	ended  bool

	wrote bool // a response line (and so the 200 header) has been written
	final *Res // SendAndClose's response, written after the method returns
}

var (
	_ grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]           = (*httpStream[pb.WriteRequest, pb.WriteResponse])(nil)
	_ grpc.ServerStreamingServer[pb.ScanResponse]                             = (*httpStream[pb.ScanRequest, pb.ScanResponse])(nil)
	_ grpc.ServerStreamingServer[pb.WatchResponse]                            = (*httpStream[pb.WatchRequest, pb.WatchResponse])(nil)
	_ grpc.BidiStreamingServer[pb.SearchRequest, pb.SearchResponse]           = (*httpStream[pb.SearchRequest, pb.SearchResponse])(nil)
	_ grpc.BidiStreamingServer[pb.WriteStreamRequest, pb.WriteStreamResponse] = (*httpStream[pb.WriteStreamRequest, pb.WriteStreamResponse])(nil)
)

func newStream[Req, Res any](g *Gateway, w http.ResponseWriter, r *http.Request) *httpStream[Req, Res] {
	return &httpStream[Req, Res]{g: g, ctx: r.Context(), w: w, r: r, dec: g.codec.NewDecoder(r.Body).(*decoder)}
}

func (s *httpStream[Req, Res]) Context() context.Context { return s.ctx }

// Headers and trailers have no HTTP rendering here; the service sets none.
func (s *httpStream[Req, Res]) SetHeader(metadata.MD) error  { return nil }
func (s *httpStream[Req, Res]) SendHeader(metadata.MD) error { return nil }
func (s *httpStream[Req, Res]) SetTrailer(metadata.MD)       {}

// RecvMsg decodes the next request object. Write batches go through
// decodeBatch, whose errors name the record to blame.
func (s *httpStream[Req, Res]) RecvMsg(m any) error {
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	if s.ended {
		return context.Canceled
	}
	if err := s.ctx.Err(); err != nil {
		return err
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("gateway: cannot decode into %T", m)
	}
	switch pm.(type) {
	case *pb.WriteRequest, *pb.WriteStreamRequest:
		return s.dec.decodeBatch(pm)
	}
	if err := s.dec.Decode(pm); err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return invalid(err)
	}
	return nil
}

func (s *httpStream[Req, Res]) Recv() (*Req, error) {
	m := new(Req)
	if err := s.RecvMsg(m); err != nil {
		return nil, err
	}
	return m, nil
}

// SendMsg writes {"result": m} and a newline, as grpc-gateway renders
// stream messages, and flushes it to the client.
func (s *httpStream[Req, Res]) SendMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("gateway: cannot encode %T", m)
	}
	b, err := s.g.codec.marshal(s.ctx, pm)
	if err != nil {
		return fmt.Errorf("render response as JSON: %w", err)
	}
	if !s.wrote {
		s.w.Header().Set("Content-Type", contentTypeNDJSON)
		s.w.WriteHeader(http.StatusOK)
		s.wrote = true
	}
	line := make([]byte, 0, len(b)+len(`{"result":}`)+1)
	line = append(line, `{"result":`...)
	line = append(line, b...)
	line = append(line, '}', '\n')
	if _, err := s.w.Write(line); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	if err := http.NewResponseController(s.w).Flush(); err != nil {
		return fmt.Errorf("flush response: %w", err)
	}
	return nil
}

func (s *httpStream[Req, Res]) Send(m *Res) error { return s.SendMsg(m) }

func (s *httpStream[Req, Res]) SendAndClose(m *Res) error {
	s.final = m
	return nil
}

// finish writes the outcome of a stream method. A client stream (writes)
// answers like a unary call: its final response, or the error as a JSON
// status with the HTTP code. A streamed response ends with an
// {"error": status} line instead, with the HTTP code too when no line was
// written yet, as grpc-gateway does.
func (s *httpStream[Req, Res]) finish(err error, streamed bool) {
	s.endReceiving()
	switch {
	case err != nil && streamed:
		s.g.writeStreamError(s.w, s.r, err, !s.wrote)
	case err != nil:
		s.g.writeError(s.w, s.r, err)
	case s.final != nil:
		s.g.writeMessage(s.w, s.r, any(s.final).(proto.Message))
	}
}

// endReceiving waits for a RecvMsg in progress on another goroutine, which
// closing the body ends, and makes later ones fail without reading. A
// body read to its end has nothing left that closing it could drop.
func (s *httpStream[Req, Res]) endReceiving() {
	if s.r.Body != nil {
		_ = s.r.Body.Close()
	}
	s.recvMu.Lock()
	s.ended = true
	s.recvMu.Unlock()
}
