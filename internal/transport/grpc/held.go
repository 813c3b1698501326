package grpc

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/grpcbuf"
)

// A response's bytes of the server's result budget (engine.Hold) stay
// taken while gRPC holds the response: a client that does not read keeps
// its responses in gRPC's queues, outside any other bound, and 30 MiB
// records made that gigabytes. sendHeld marshals the response with a
// release buffer behind its bytes (grpcbuf.Held), which gRPC frees once it
// has written everything before it to the connection or dropped it with
// the stream. A connection that dies with responses queued does not free
// them; HoldsHandler, a stats handler, releases what is left of them when
// the connection ends.

// heldKey is the context key of a connection's heldConn.
type heldKey struct{}

// heldConn is what one connection's queued responses hold of the result
// budget. mu guards held and ended.
type heldConn struct {
	mu    sync.Mutex
	held  map[*released]struct{}
	ended bool
}

// released gives back one response's Hold once: when gRPC frees its
// release buffer (Put), when its send fails, or when its connection ends.
type released struct {
	c    *heldConn
	h    engine.Hold
	done atomic.Bool
}

var _ interface {
	Get(int) *[]byte
	Put(*[]byte)
} = (*released)(nil)

// Get is never called: a release buffer is made with its data.
func (r *released) Get(size int) *[]byte { return grpcbuf.Pool.Get(size) }

// Put is called by gRPC when it frees the release buffer.
func (r *released) Put(*[]byte) { r.release() }

func (r *released) release() {
	if !r.done.CompareAndSwap(false, true) {
		return
	}
	r.c.mu.Lock()
	delete(r.c.held, r)
	r.c.mu.Unlock()
	r.h.Release()
}

// add registers h with the connection; nil when the connection has ended
// (h is then given back at once).
func (c *heldConn) add(h engine.Hold) *released {
	r := &released{c: c, h: h}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		h.Release()
		return nil
	}
	c.held[r] = struct{}{}
	c.mu.Unlock()
	return r
}

// end gives back what the connection's responses still hold.
func (c *heldConn) end() {
	c.mu.Lock()
	c.ended = true
	rs := make([]*released, 0, len(c.held))
	for r := range c.held {
		rs = append(rs, r)
	}
	c.mu.Unlock()
	for _, r := range rs {
		r.release()
	}
}

// HoldsHandler is the stats handler the server must install
// (grpc.StatsHandler) for sendHeld: it gives each connection its
// heldConn and releases what is left of it when the connection ends.
func HoldsHandler() stats.Handler { return holdsHandler{} }

type holdsHandler struct{}

func (holdsHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, heldKey{}, &heldConn{held: map[*released]struct{}{}})
}

func (holdsHandler) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); ok {
		if c, _ := ctx.Value(heldKey{}).(*heldConn); c != nil {
			c.end()
		}
	}
}

func (holdsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (holdsHandler) HandleRPC(context.Context, stats.RPCStats) {}

// sendHeld sends m on st and gives h back once the bytes are gone: on a
// connection of the gRPC server (HoldsHandler installed) when gRPC has
// written or dropped them; on any other stream (the REST gateway's, which
// has encoded m when SendMsg returns) when SendMsg returns.
func sendHeld(st grpc.ServerStream, m any, h engine.Hold) error {
	c, _ := st.Context().Value(heldKey{}).(*heldConn)
	if c == nil || h.Bytes() == 0 {
		err := st.SendMsg(m)
		h.Release()
		return err
	}
	r := c.add(h)
	if r == nil {
		return st.SendMsg(m)
	}
	err := st.SendMsg(&grpcbuf.Held{Msg: m, Pool: r})
	if err != nil {
		r.release() // whatever gRPC kept of it, it frees; nothing is written now
	}
	return err
}

// heldAnswer is the response a unary call returns to gRPC: resp itself,
// or resp held until gRPC has written it when its answer holds bytes of
// the result budget (engine.AnswerSlot).
func heldAnswer(ctx context.Context, resp any, err error, h engine.Hold) any {
	if h.Bytes() == 0 {
		return resp
	}
	c, _ := ctx.Value(heldKey{}).(*heldConn)
	if err != nil || resp == nil || c == nil {
		h.Release()
		return resp
	}
	r := c.add(h)
	if r == nil {
		return resp
	}
	// gRPC marshals every reply it is given (sendResponse), so the release
	// buffer is made and freed; should it not be, the connection's end
	// releases it.
	return &grpcbuf.Held{Msg: resp, Pool: r}
}
