package grpc

import (
	"context"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

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
// them: the server's listener is wrapped (TrackConns) so that what they
// hold is given back when the connection closes.

// heldConn is what one connection's queued responses hold of the result
// budget (engine.HeldSum): each response's Hold is added when it is handed
// to gRPC and returned when gRPC frees it; the connection's end gives back
// the rest.
type heldConn struct {
	sum engine.HeldSum
}

// released gives back one response's Hold once: when gRPC frees its
// release buffer (Put), when its send fails, or when its connection ends.
// It is also the message handed to SendMsg (its Held), so that one
// allocation carries both.
type released struct {
	grpcbuf.Held
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
	if r.done.CompareAndSwap(false, true) {
		r.c.sum.Return(r.h)
	}
}

// add registers m, held with h, with the connection and returns what to
// send; nil when the connection has ended (h is then given back at once).
func (c *heldConn) add(m any, h engine.Hold) *released {
	return c.addTo(new(released), m, h)
}

// addTo is add into r, which must be unused.
func (c *heldConn) addTo(r *released, m any, h engine.Hold) *released {
	if !c.sum.Add(h) {
		return nil
	}
	r.c, r.h = c, h
	r.Msg, r.Pool = m, r
	return r
}

// end gives back what the connection's responses still hold.
func (c *heldConn) end() { c.sum.End() }

// TrackConns wraps the gRPC server's listener so that each connection has
// its heldConn, ended when the connection closes.
func (s *Service) TrackConns(l net.Listener) net.Listener {
	return &trackedListener{Listener: l}
}

type trackedListener struct{ net.Listener }

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: c, remote: &trackedAddr{Addr: c.RemoteAddr(), held: &heldConn{}}}, nil
}

type trackedConn struct {
	net.Conn
	remote *trackedAddr
}

// RemoteAddr is the peer address of every call on the connection.
func (c *trackedConn) RemoteAddr() net.Addr { return c.remote }

// Close ends the connection's heldConn (a second end gives back nothing
// more) and closes the connection.
func (c *trackedConn) Close() error {
	c.remote.held.end()
	return c.Conn.Close()
}

// trackedAddr is a tracked connection's remote address, which gRPC gives
// every call on the connection as its peer's: the address itself, and the
// connection's heldConn, so that a call finds it there with no lookup
// (every unary read does).
type trackedAddr struct {
	net.Addr
	held *heldConn
}

// heldConnOf returns the connection a call's context belongs to, or nil
// for a call that did not come through the tracked listener (the REST
// gateway's, which calls the service in process).
func (s *Service) heldConnOf(ctx context.Context) *heldConn {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	if a, ok := p.Addr.(*trackedAddr); ok {
		return a.held
	}
	return nil
}

// sendHeld sends m on st and gives h back once the bytes are gone: on a
// connection of the gRPC server (c, from heldConnOf) when gRPC has written
// or dropped them, or the connection has ended; on any other stream (the
// REST gateway's, which has encoded m when SendMsg returns) when SendMsg
// returns.
func sendHeld(c *heldConn, st grpc.ServerStream, m any, h engine.Hold) error {
	if c == nil || h.Bytes() == 0 {
		err := st.SendMsg(m)
		h.Release()
		return err
	}
	r := c.add(m, h)
	if r == nil {
		return st.SendMsg(m)
	}
	err := st.SendMsg(&r.Held)
	if err != nil {
		r.release() // whatever gRPC kept of it, it frees; nothing is written now
	}
	return err
}

// unaryCall is the context of a unary call whose answer may hold bytes of
// the result budget: its slot, and the release of its answer, in one
// allocation.
type unaryCall struct {
	engine.SlotContext
	r released
}

// heldAnswer is the response a unary call returns to gRPC: resp itself,
// or resp held until gRPC has written it when its answer holds bytes of
// the result budget (engine.AnswerSlot), released by r.
func heldAnswer(c *heldConn, r *released, resp any, err error, h engine.Hold) any {
	if h.Bytes() == 0 {
		return resp
	}
	if err != nil || resp == nil || c == nil {
		h.Release()
		return resp
	}
	if c.addTo(r, resp, h) == nil {
		return resp
	}
	// gRPC marshals every reply it is given (sendResponse), so the release
	// buffer is made and freed; should it not be, the connection's end
	// releases it.
	return &r.Held
}
