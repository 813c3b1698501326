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
	// A request that does not decode ends the stream (its queries' ids,
	// their ordinals, are unknown) with INVALID_ARGUMENT, after the
	// answers to the requests before it.
	//
	// A request the engine is done with (it recycles those it ran on this
	// goroutine) is decoded over by the next: its messages are reused.
	var last, free *SearchDecoder
	recv := func() (*pb.SearchRequest, error) {
		d := free
		if free = nil; d == nil {
			d = NewSearchDecoder()
		}
		last = d
		if err := recvMsg(st, d); err != nil {
			return nil, err
		}
		return checkQueries(d.SearchRequest, s.opts.MaxSearchQueries)
	}
	recycle := func(req *pb.SearchRequest) {
		if last != nil && last.SearchRequest == req {
			free = last
		}
	}
	hc := s.heldConnOf(st.Context())
	send := func(resp *pb.SearchResponse, h engine.Hold) error { return sendHeld(hc, st, resp, h) }
	if id != nil {
		g := &searchGuard{id: id, denied: map[uint64]string{}}
		recv, send = g.recv(recv), g.send(send)
	}
	// Both gRPC's SendMsg (the server's codec) and the REST gateway's
	// stream encode a response before they return.
	sio := engine.SearchIO{Recv: recv, Send: send, SendEncodes: true, Recycle: recycle}
	// On a gRPC stream (not the REST gateway's, which renders messages as
	// JSON) responses the engine writes as wire bytes go out as a
	// grpcbuf.Frame, which the server's codec copies as they are. The
	// key's guard needs no say in the responses to plain lookups: it
	// rewrites the errors of queries it refused, which are never plain
	// lookups. A scoped key's guard must see every other response.
	if grpc.ServerTransportStreamFromContext(st.Context()) != nil {
		var f grpcbuf.Frame
		sio.SendWire = func(b []byte, h engine.Hold) error {
			f.B = b
			err := sendHeld(hc, st, &f, h) // the codec copies f.B
			f.B = nil
			return err
		}
		sio.WireAnyQuery = id == nil || !id.Scoped()
		if id == nil {
			sio.RecvWire = s.searchRecvWire(st, &last, &free)
			sio.MaxWireQueries = s.opts.MaxSearchQueries
		}
	}
	if err := s.e.SearchStream(st.Context(), sio); err != nil {
		return toStatus(err)
	}
	return nil
}

// searchRecvWire returns a Search stream's engine.SearchIO.RecvWire: each
// request arrives as its bytes (a grpcbuf.Frame, which the codec copies as
// they are), and its decode function decodes them into a SearchDecoder as
// recv would have received them, with the same errors: the codec's decoder
// and recvMsg's wrapping. A request of more queries than the server takes
// is handed over to be decoded, which refuses it. Only without keys: a
// scoped key's guard reads every request's queries.
func (s *Service) searchRecvWire(st grpc.ServerStream, last, free **SearchDecoder) func() ([]byte, func() (*pb.SearchRequest, error), error) {
	var f grpcbuf.Frame
	codec := Codec{MaxQueries: s.opts.MaxSearchQueries}
	decode := func() (*pb.SearchRequest, error) {
		d := *free
		if *free = nil; d == nil {
			d = NewSearchDecoder()
		}
		*last = d
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(f.B)}, d); err != nil {
			return nil, apierror.Wrap(apierror.InvalidArgument, err)
		}
		return checkQueries(d.SearchRequest, s.opts.MaxSearchQueries)
	}
	return func() ([]byte, func() (*pb.SearchRequest, error), error) {
		if err := st.RecvMsg(&f); err != nil {
			return nil, nil, err
		}
		// The engine runs from the bytes only requests within
		// SearchIO.MaxWireQueries; it decodes the others, which decode
		// refuses.
		return f.B, decode, nil
	}
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
type searchGuard struct {
	id   *auth.Identity
	next uint64 // id of the next query received; the receiving goroutine's

	mu     sync.Mutex        // guards denied: written by recv, read by send
	denied map[uint64]string // query id -> the type it was refused
}

func (g *searchGuard) recv(recv func() (*pb.SearchRequest, error)) func() (*pb.SearchRequest, error) {
	return func() (*pb.SearchRequest, error) {
		req, err := recv()
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
}

func (g *searchGuard) send(send func(*pb.SearchResponse, engine.Hold) error) func(*pb.SearchResponse, engine.Hold) error {
	return func(resp *pb.SearchResponse, h engine.Hold) error {
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
		return send(resp, h)
	}
}

// Query implements pbgrpc.ProtobaseServer.
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
