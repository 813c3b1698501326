// Package connlimit owns the cap on the connections a listener holds
// open: a net.Listener wrapper that counts the connections it accepted
// and not yet closed, and closes a new one at once when the count is at
// the cap.
//
// A connection costs its holder nothing: a TCP connect, then silence.
// Without a cap, enough of them exhaust the process's file descriptors,
// and then every accept fails and the store cannot open the files it
// needs. A connection over the cap is accepted and closed at once, not
// left in the kernel's accept queue: its client sees the connection
// close (or reset) without waiting, and the queue never fills with
// connections that would be served only after the ones before them time
// out. Connections already open keep working at the cap.
//
// Holding accept instead (stop calling Accept at the cap) was rejected:
// clients would wait for the kernel's backlog, then for their dial
// timeout, with no sign of why, and the backlog would be served in order
// behind whatever filled it.
package connlimit

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener is a net.Listener whose open connections are capped. Safe for
// concurrent use.
//
// Invariant: open is the number of connections Accept returned whose
// Close has not been called, and never exceeds max when max > 0.
type Listener struct {
	net.Listener
	name string // in the log and the metrics
	max  int64  // 0 or less: no cap
	log  *slog.Logger

	open     atomic.Int64
	refused  atomic.Uint64
	lastWarn atomic.Int64 // unix nanoseconds of the last warning
}

// warnEvery spaces the warnings of one listener at its cap: a flood of
// connections must not become a flood of log lines.
const warnEvery = time.Minute

// Wrap returns l with at most limit connections open at once (limit <=
// 0: no cap). name names the listener in the log; log may be nil.
func Wrap(l net.Listener, name string, limit int, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Listener{Listener: l, name: name, max: int64(limit), log: log}
}

// Accept returns the next connection under the cap. A connection over
// the cap is closed as soon as it is accepted, and Accept waits for the
// next one.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.acquire() {
			return &conn{Conn: c, l: l}, nil
		}
		// Counted before the close, so that a client seeing its
		// connection closed finds it counted.
		n := l.refused.Add(1)
		_ = c.Close()
		l.warn(c.RemoteAddr(), n)
	}
}

func (l *Listener) acquire() bool {
	if l.max <= 0 {
		l.open.Add(1)
		return true
	}
	for {
		n := l.open.Load()
		if n >= l.max {
			return false
		}
		if l.open.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (l *Listener) warn(remote net.Addr, refused uint64) {
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(warnEvery) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("refused connections: the listener holds as many as it may",
		"listener", l.name, "limit", l.max, "remote", remote.String(), "refused_total", refused)
}

// Name returns the listener's name.
func (l *Listener) Name() string { return l.name }

// Open returns the connections accepted and not yet closed.
func (l *Listener) Open() int64 { return l.open.Load() }

// Refused returns the connections closed at once for being over the cap.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Max returns the cap (0 or less: none).
func (l *Listener) Max() int64 { return l.max }

// conn gives its slot back on its first Close.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
