package grpc

import (
	"context"
	"net"
	"net/netip"
	"sync"
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
// budget: a list of them, linked through the responses themselves (a
// response is added and removed each time one is sent, where a map's
// insert and delete cost more). mu guards head, the responses' links and
// ended.
type heldConn struct {
	mu    sync.Mutex
	head  *released
	ended bool
}

// released gives back one response's Hold once: when gRPC frees its
// release buffer (Put), when its send fails, or when its connection ends.
// It is also the message handed to SendMsg (its Held), so that one
// allocation carries both.
type released struct {
	grpcbuf.Held
	c          *heldConn
	h          engine.Hold
	done       atomic.Bool
	prev, next *released // in c's list, while held
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
	r.c.unlink(r)
	r.c.mu.Unlock()
	r.h.Release()
}

// unlink takes r out of c's list, if it is in it; c.mu is held.
func (c *heldConn) unlink(r *released) {
	if r.prev != nil {
		r.prev.next = r.next
	} else if c.head == r {
		c.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	}
	r.prev, r.next = nil, nil
}

// add registers m, held with h, with the connection and returns what to
// send; nil when the connection has ended (h is then given back at once).
func (c *heldConn) add(m any, h engine.Hold) *released {
	r := &released{c: c, h: h}
	r.Msg, r.Pool = m, r
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		h.Release()
		return nil
	}
	if r.next = c.head; r.next != nil {
		r.next.prev = r
	}
	c.head = r
	c.mu.Unlock()
	return r
}

// end gives back what the connection's responses still hold.
func (c *heldConn) end() {
	c.mu.Lock()
	c.ended = true
	var rs []*released
	for r := c.head; r != nil; r = r.next {
		rs = append(rs, r)
	}
	c.mu.Unlock()
	for _, r := range rs {
		r.release()
	}
}

// connKey names a connection by its two ends, as gRPC's peer knows them.
type connKey struct{ local, remote netip.AddrPort }

func keyOf(local, remote net.Addr) (connKey, bool) {
	l, lok := local.(*net.TCPAddr)
	r, rok := remote.(*net.TCPAddr)
	if !lok || !rok {
		return connKey{}, false
	}
	return connKey{l.AddrPort(), r.AddrPort()}, true
}

// heldConns are the connections of the service's gRPC server, by their
// ends: a sync.Map, which every unary read looks up (heldConnOf) without
// a lock shared with the other calls, and which changes only as
// connections come and go.
type heldConns struct {
	m sync.Map // connKey to *heldConn
}

// TrackConns wraps the gRPC server's listener so that each connection has
// its heldConn, ended when the connection closes.
func (s *Service) TrackConns(l net.Listener) net.Listener {
	return &trackedListener{Listener: l, conns: &s.conns}
}

type trackedListener struct {
	net.Listener
	conns *heldConns
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	k, ok := keyOf(c.LocalAddr(), c.RemoteAddr())
	if !ok {
		return c, nil
	}
	hc := &heldConn{}
	l.conns.m.Store(k, hc)
	return &trackedConn{Conn: c, conns: l.conns, key: k, held: hc}, nil
}

type trackedConn struct {
	net.Conn
	conns *heldConns
	key   connKey
	held  *heldConn
	once  sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.conns.m.CompareAndDelete(c.key, c.held)
		c.held.end()
	})
	return c.Conn.Close()
}

// heldConnOf returns the connection a call's context belongs to, or nil
// for a call that did not come through the tracked listener (the REST
// gateway's, which calls the service in process).
func (s *Service) heldConnOf(ctx context.Context) *heldConn {
	p, ok := peer.FromContext(ctx)
	if !ok || p.LocalAddr == nil || p.Addr == nil {
		return nil
	}
	k, ok := keyOf(p.LocalAddr, p.Addr)
	if !ok {
		return nil
	}
	hc, _ := s.conns.m.Load(k)
	c, _ := hc.(*heldConn)
	return c
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

// heldAnswer is the response a unary call returns to gRPC: resp itself,
// or resp held until gRPC has written it when its answer holds bytes of
// the result budget (engine.AnswerSlot).
func heldAnswer(c *heldConn, resp any, err error, h engine.Hold) any {
	if h.Bytes() == 0 {
		return resp
	}
	if err != nil || resp == nil || c == nil {
		h.Release()
		return resp
	}
	r := c.add(resp, h)
	if r == nil {
		return resp
	}
	// gRPC marshals every reply it is given (sendResponse), so the release
	// buffer is made and freed; should it not be, the connection's end
	// releases it.
	return &r.Held
}
