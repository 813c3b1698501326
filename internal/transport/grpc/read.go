package grpc

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/grpcbuf"
)

// Search implements pbgrpc.ProtobaseServer. With auth on, every request
// re-checks that the key is not revoked, and a query on a type outside the
// key's scope fails alone with PERMISSION_DENIED (see searchGuard).
func (s *Service) Search(st grpc.BidiStreamingServer[pb.SearchRequest, pb.SearchResponse]) error {
	id, err := s.require(st.Context(), auth.RoleRead)
	if err != nil {
		return err
	}
	src := &searchSource{st: st, limit: s.opts.MaxSearchQueries}
	sink := &searchSink{id: id, hc: s.heldConnOf(st.Context()), st: st}
	var in engine.SearchSource = src
	var out engine.SearchSink = sink
	// On a gRPC stream (not the REST gateway's, which renders messages as
	// JSON) responses the engine writes as wire bytes go out as a
	// grpcbuf.Frame, which the server's codec copies as they are.
	var ws *wireSink
	if grpc.ServerTransportStreamFromContext(st.Context()) != nil {
		ws = &wireSink{searchSink: sink}
		out = ws
		if id == nil {
			in = &wireSource{searchSource: src, codec: Codec{MaxQueries: src.limit}}
		}
	}
	// A key's guard reads every request (revocation, scope). An unscoped
	// key's guard refuses no query, so it has nothing to rewrite in the
	// responses; a scoped key's must see every response but those to plain
	// lookups, which never carry an error of a query it refused.
	if id != nil {
		g := &searchGuard{id: id, src: src, sink: sink, denied: map[uint64]string{}}
		in = g
		if id.Scoped() {
			out = g
			if ws != nil {
				out = &wireGuard{searchGuard: g, wire: ws}
			}
		}
	}
	// A key revoked while a query runs ends it, and no response goes out
	// after the revocation (searchSink).
	ctx, stop := id.WithRevocation(st.Context())
	defer stop()
	if err := s.e.SearchStream(ctx, in, out); err != nil {
		if rerr := id.Check(); rerr != nil {
			return toStatus(rerr)
		}
		return toStatus(err)
	}
	return nil
}

// The engine finds a stream's fast paths by type assertion: these make a
// lost method a build error, not a silently slower stream.
var (
	_ engine.Recycler       = (*searchSource)(nil)
	_ engine.WireSource     = (*wireSource)(nil)
	_ engine.EncodingSink   = (*searchSink)(nil)
	_ engine.WireSink       = (*wireSink)(nil)
	_ engine.SearchSource   = (*searchGuard)(nil)
	_ engine.Recycler       = (*searchGuard)(nil)
	_ engine.SearchSink     = (*searchGuard)(nil)
	_ engine.EncodingSink   = (*searchGuard)(nil)
	_ engine.LookupWireSink = (*wireGuard)(nil)
)

// searchSource receives a Search stream's requests. A request that does
// not decode ends the stream (its queries' ids, their ordinals, are
// unknown) with INVALID_ARGUMENT, after the answers to the requests before
// it. A request the engine is done with (it recycles those it ran on the
// receiving goroutine) is decoded over by the next: its messages are
// reused.
type searchSource struct {
	st    grpc.ServerStream
	limit int // MaxSearchQueries
	// last is the decoder of the last request received; free, the one
	// the next request may be decoded into.
	last, free *SearchDecoder
}

// decoder returns the decoder for the next request.
func (s *searchSource) decoder() *SearchDecoder {
	d := s.free
	if s.free = nil; d == nil {
		d = NewSearchDecoder()
	}
	s.last = d
	return d
}

// Recv implements engine.SearchSource.
func (s *searchSource) Recv() (*pb.SearchRequest, error) {
	d := s.decoder()
	if err := recvMsg(s.st, d); err != nil {
		return nil, err
	}
	return checkQueries(d.SearchRequest, s.limit)
}

// Recycle implements engine.Recycler.
func (s *searchSource) Recycle(req *pb.SearchRequest) {
	if s.last != nil && s.last.SearchRequest == req {
		s.free = s.last
	}
}

// wireSource is a gRPC stream's searchSource handing each request over as
// its bytes (a grpcbuf.Frame, which the codec copies as they are), for a
// stream without keys: a key's guard reads every request's queries.
type wireSource struct {
	*searchSource
	f     grpcbuf.Frame
	codec Codec
}

// RecvWire implements engine.WireSource. The engine runs from the bytes
// only requests within MaxQueries; it decodes the others, which DecodeWire
// refuses.
func (s *wireSource) RecvWire() ([]byte, error) {
	if err := s.st.RecvMsg(&s.f); err != nil {
		return nil, err
	}
	return s.f.B, nil
}

// DecodeWire implements engine.WireSource: it decodes the bytes into a
// SearchDecoder as Recv would have received them, with the same errors:
// the codec's decoder and recvMsg's wrapping.
func (s *wireSource) DecodeWire() (*pb.SearchRequest, error) {
	d := s.decoder()
	if err := s.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(s.f.B)}, d); err != nil {
		return nil, apierror.Wrap(apierror.InvalidArgument, err)
	}
	return checkQueries(d.SearchRequest, s.limit)
}

// MaxQueries implements engine.WireSource.
func (s *wireSource) MaxQueries() int { return s.limit }

// searchSink sends a Search stream's responses. Both gRPC's SendMsg (the
// server's codec) and the REST gateway's stream encode a response before
// they return (engine.EncodingSink). With a key (id), each response
// re-checks it: one atomic load.
type searchSink struct {
	id *auth.Identity
	hc *heldConn
	st grpc.ServerStream
}

// Send implements engine.SearchSink.
func (s *searchSink) Send(resp *pb.SearchResponse, h engine.Hold) error {
	if err := s.id.Check(); err != nil {
		h.Release()
		return err
	}
	return sendHeld(s.hc, s.st, resp, h)
}

// EncodesOnSend implements engine.EncodingSink.
func (*searchSink) EncodesOnSend() {}

// wireSink is a gRPC stream's searchSink, which also sends responses given
// as wire bytes.
type wireSink struct {
	*searchSink
	f grpcbuf.Frame
}

// SendWire implements engine.WireSink.
func (s *wireSink) SendWire(b []byte, h engine.Hold) error {
	if err := s.id.Check(); err != nil {
		h.Release()
		return err
	}
	s.f.B = b
	err := sendHeld(s.hc, s.st, &s.f, h) // the codec copies f.B
	s.f.B = nil
	return err
}

// checkQueries refuses a request of more than limit queries (none when
// limit is not positive).
func checkQueries(req *pb.SearchRequest, limit int) (*pb.SearchRequest, error) {
	if n := len(req.GetQueries()); limit > 0 && n > limit {
		return nil, apierror.Errorf(apierror.InvalidArgument,
			"%d queries in one request, more than the server's limit of %d (max search queries)", n, limit)
	}
	return req, nil
}

// searchGuard applies a key to a Search stream without the engine knowing
// about keys: a query on a type outside the scope is replaced, before the
// engine sees it, by an empty query (which fails, keeping query ids in
// step), and that failure is rewritten to PERMISSION_DENIED on its way out.
// It is the stream's engine.SearchSource, and for a scoped key its
// engine.SearchSink.
type searchGuard struct {
	id   *auth.Identity
	src  *searchSource
	sink *searchSink
	next uint64 // id of the next query received; the receiving goroutine's

	mu     sync.Mutex        // guards denied: written by Recv, read by Send
	denied map[uint64]string // query id -> the type it was refused
}

// Recv implements engine.SearchSource.
func (g *searchGuard) Recv() (*pb.SearchRequest, error) {
	req, err := g.src.Recv()
	if err != nil {
		return nil, err
	}
	if err := g.id.Check(); err != nil {
		return nil, err
	}
	if g.id.Scoped() {
		for i, q := range req.Queries {
			if t := q.GetType(); !g.id.AllowsType(t) {
				g.mu.Lock()
				g.denied[g.next+uint64(i)] = t
				g.mu.Unlock()
				req.Queries[i] = &pb.Query{}
			}
		}
	}
	g.next += uint64(len(req.Queries))
	return req, nil
}

// Recycle implements engine.Recycler.
func (g *searchGuard) Recycle(req *pb.SearchRequest) { g.src.Recycle(req) }

// Send implements engine.SearchSink.
func (g *searchGuard) Send(resp *pb.SearchResponse, h engine.Hold) error {
	if len(resp.Errors) > 0 {
		g.mu.Lock()
		for _, e := range resp.Errors {
			if t, ok := g.denied[e.Query]; ok {
				delete(g.denied, e.Query)
				e.Code = int32(codes.PermissionDenied)
				e.Message = fmt.Sprintf("API key %q may not access record type %s", g.id.Name, t)
				e.Field = ""
			}
		}
		g.mu.Unlock()
	}
	return g.sink.Send(resp, h)
}

// EncodesOnSend implements engine.EncodingSink: Send sends with the
// searchSink.
func (*searchGuard) EncodesOnSend() {}

// wireGuard is a scoped key's searchGuard on a gRPC stream: the responses
// to plain lookups, which carry no error of a refused query, go out as
// wire bytes.
type wireGuard struct {
	*searchGuard
	wire *wireSink
}

// SendLookupWire implements engine.LookupWireSink.
func (g *wireGuard) SendLookupWire(b []byte, h engine.Hold) error { return g.wire.SendWire(b, h) }

// Query implements pb.ProtobaseServer.
func (s *Service) Query(ctx context.Context, req *pb.QueryRequest) (*pb.QueryResponse, error) {
	id, err := s.require(ctx, auth.RoleRead)
	if err != nil {
		return nil, err
	}
	if err := id.CheckType(req.GetQuery().GetType()); err != nil {
		return nil, toStatus(err)
	}
	resp, h, err := s.e.Query(ctx, req, 0)
	if err != nil {
		return nil, toStatus(err)
	}
	engine.KeepAnswer(ctx, h)
	return resp, nil
}

// Get implements pbgrpc.ProtobaseServer.
func (s *Service) Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	id, err := s.require(ctx, auth.RoleRead)
	if err != nil {
		return nil, err
	}
	if err := id.CheckType(req.GetType()); err != nil {
		return nil, toStatus(err)
	}
	resp, h, err := s.e.GetRecords(ctx, req, 0)
	if err != nil {
		return nil, toStatus(err)
	}
	engine.KeepAnswer(ctx, h)
	return resp, nil
}
