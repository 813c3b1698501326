package grpc

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
)

// Search implements pb.ProtobaseServer. With auth on, every request
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
		req := d.SearchRequest
		if n, limit := len(req.GetQueries()), s.opts.MaxSearchQueries; limit > 0 && n > limit {
			return nil, apierror.Errorf(codes.InvalidArgument,
				"%d queries in one request, more than the server's limit of %d (max search queries)", n, limit)
		}
		return req, nil
	}
	recycle := func(req *pb.SearchRequest) {
		if last != nil && last.SearchRequest == req {
			free = last
		}
	}
	send := st.Send
	if id != nil {
		g := &searchGuard{id: id, denied: map[uint64]string{}}
		recv, send = g.recv(recv), g.send(st.Send)
	}
	// Both gRPC's SendMsg (the server's codec) and the REST gateway's
	// stream encode a response before they return.
	sio := engine.SearchIO{Recv: recv, Send: send, SendEncodes: true, Recycle: recycle}
	if err := s.e.SearchStream(st.Context(), sio); err != nil {
		return toStatus(err)
	}
	return nil
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

func (g *searchGuard) send(send func(*pb.SearchResponse) error) func(*pb.SearchResponse) error {
	return func(resp *pb.SearchResponse) error {
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
		return send(resp)
	}
}

// Query implements pb.ProtobaseServer.
func (s *Service) Query(ctx context.Context, req *pb.QueryRequest) (*pb.QueryResponse, error) {
	id, err := s.require(ctx, auth.RoleRead)
	if err != nil {
		return nil, err
	}
	if err := id.CheckType(req.GetQuery().GetType()); err != nil {
		return nil, toStatus(err)
	}
	resp, err := s.e.Query(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// Get implements pb.ProtobaseServer.
func (s *Service) Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	id, err := s.require(ctx, auth.RoleRead)
	if err != nil {
		return nil, err
	}
	if err := id.CheckType(req.GetType()); err != nil {
		return nil, toStatus(err)
	}
	resp, err := s.e.GetRecords(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}
