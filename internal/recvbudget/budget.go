// Package recvbudget owns the receive budget of the gRPC server: the bytes
// of gRPC messages that have begun arriving and are not complete, per
// connection and over all of them.
//
// grpc-go buffers a message until the whole of it has arrived, and while a
// handler waits for one it grows the stream's flow-control window to the
// size the message's 5-byte prefix declares; the connection's window is
// given back as bytes arrive. Flow control therefore bounds none of it.
// This package watches each connection's plaintext bytes (a net.Conn
// wrapper, after TLS), parses the HTTP/2 frames both ways and, per open
// stream, the gRPC message prefixes, and so knows what each connection
// holds. A connection over its share is closed; when the sum over all
// connections would exceed the budget, the connection holding the most is
// closed. Reads are never blocked: blocking would stall the other streams
// of a connection or deadlock on half-received messages.
package recvbudget

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
)

// Options configure a Budget.
type Options struct {
	// Limit bounds the partial message bytes of all connections together.
	Limit int64
	// Share bounds those of one connection.
	Share int64
	// Logger receives one warning per connection closed; nil discards.
	Logger *slog.Logger
}

// Budget accounts the partial message bytes of every connection it
// wrapped. It is safe for concurrent use.
//
// Invariant: held is the sum of the held bytes of the connections not yet
// released (each conn's in.held), so it is never negative and returns to
// 0 when every connection is closed.
type Budget struct {
	limit, share int64
	log          *slog.Logger

	held        atomic.Int64
	cutShare    atomic.Uint64 // connections closed for exceeding their share
	cutOverflow atomic.Uint64 // connections closed as the largest holder over the budget

	mu    sync.Mutex // guards conns; taken before a conn's mu, never under it
	conns map[*conn]struct{}
}

// New returns a budget with o's limits; a limit of 0 or less is no limit.
func New(o Options) *Budget {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Budget{limit: o.Limit, share: o.Share, log: log, conns: make(map[*conn]struct{})}
}

// Held returns the partial message bytes held over all connections.
func (b *Budget) Held() int64 { return b.held.Load() }

// Closed returns how many connections were closed for holding more than
// their share, and how many as the largest holder when the server-wide
// budget was exceeded.
func (b *Budget) Closed() (share, budget uint64) { return b.cutShare.Load(), b.cutOverflow.Load() }

// Conns returns the connections being accounted.
func (b *Budget) Conns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

// Wrap returns c, accounted: c must carry HTTP/2 from a client (after any
// TLS). Closing the result releases what it holds.
func (b *Budget) Wrap(c net.Conn) net.Conn {
	w := &conn{Conn: c, b: b, in: newInbound()}
	b.mu.Lock()
	b.conns[w] = struct{}{}
	b.mu.Unlock()
	return w
}

// errCut is what Read returns on a connection the budget closed.
var errCut = errors.New("recvbudget: connection closed: it held too many bytes of partial gRPC messages")

// conn is an accounted connection.
//
// Invariant: while not closed, held mirrors in.held (read without mu by
// the search for the largest holder) and in.held is counted in b.held;
// once closed, neither counts anything.
type conn struct {
	net.Conn
	b    *Budget
	held atomic.Int64

	mu     sync.Mutex // guards in and closed
	in     inbound
	closed bool

	wmu sync.Mutex // guards out
	out outbound
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n <= 0 {
		return n, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, errCut
	}
	before := c.in.held
	c.in.feed(p[:n])
	delta := c.in.held - before
	held := c.in.held
	total := c.b.held.Add(delta)
	c.held.Store(held)
	c.mu.Unlock()
	if c.b.share > 0 && held > c.b.share {
		if c.cut() {
			c.b.cutShare.Add(1)
			c.b.log.Warn("closed a gRPC connection holding more partial message bytes than its share",
				"remote", c.RemoteAddr().String(), "held", held, "share", c.b.share)
		}
		return 0, errCut
	}
	if delta > 0 && c.b.limit > 0 && total > c.b.limit {
		c.b.overflow()
		if c.isClosed() {
			return 0, errCut
		}
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n <= 0 {
		return n, err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for q := p[:n]; len(q) > 0; {
		k, sid, ended := c.out.scan(q)
		q = q[k:]
		if ended {
			c.endStream(sid)
		}
	}
	return n, err
}

// endStream releases stream sid, which the server ended.
func (c *conn) endStream(sid uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	before := c.in.held
	c.in.end(sid)
	c.b.held.Add(c.in.held - before)
	c.held.Store(c.in.held)
}

// Close releases what c holds and closes it.
func (c *conn) Close() error {
	c.release()
	c.b.mu.Lock()
	delete(c.b.conns, c)
	c.b.mu.Unlock()
	return c.Conn.Close()
}

// release stops accounting c; it reports whether c was still accounted.
func (c *conn) release() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	c.b.held.Add(-c.in.held)
	c.in.held = 0
	c.held.Store(0)
	return true
}

// cut releases c and closes the underlying connection, so that grpc-go's
// reader fails and tears down the transport and every buffer of its
// streams. It reports whether this call did it.
func (c *conn) cut() bool {
	if !c.release() {
		return false
	}
	_ = c.Conn.Close()
	return true
}

func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// overflow closes the largest holders until the total is within the
// limit. The largest holder is the attacker when there is one; a client
// with little in flight is never chosen while a larger one exists.
func (b *Budget) overflow() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.held.Load() > b.limit {
		var victim *conn
		var most int64
		for c := range b.conns {
			if h := c.held.Load(); h > most {
				victim, most = c, h
			}
		}
		if victim == nil || !victim.cut() {
			return
		}
		b.cutOverflow.Add(1)
		b.log.Warn("closed the gRPC connection holding the most partial message bytes: the server's receive budget is exceeded",
			"remote", victim.RemoteAddr().String(), "held", most, "budget", b.limit, "total", b.held.Load()+most)
	}
}

// Listener returns l with every accepted connection accounted (for a
// plaintext gRPC listener; with TLS use Credentials).
func (b *Budget) Listener(l net.Listener) net.Listener { return listener{l, b} }

type listener struct {
	net.Listener
	b *Budget
}

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.b.Wrap(c), nil
}

// Credentials returns tc with every connection it accepts accounted after
// its handshake, where the bytes are plaintext HTTP/2.
func (b *Budget) Credentials(tc credentials.TransportCredentials) credentials.TransportCredentials {
	return creds{tc, b}
}

type creds struct {
	credentials.TransportCredentials
	b *Budget
}

func (c creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return c.b.Wrap(conn), info, nil
}

func (c creds) Clone() credentials.TransportCredentials {
	return creds{c.TransportCredentials.Clone(), c.b}
}
