package server

import (
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/protobase/protobase/internal/memsize"
	"github.com/protobase/protobase/internal/recvbudget"
)

// Receive budget defaults (docs/limits.md, "gRPC"): what partial gRPC
// messages, begun and not complete, may hold.
const (
	defaultMaxMessageBytes = 64 << 20

	// ReceiveShareMessages is how many messages of MaxMessageBytes one
	// connection may have partly received at once by default (fewer when
	// MaxStreamsPerConn is lower): a client sending a few maximal
	// messages on parallel streams is not cut.
	ReceiveShareMessages = 4
	// ReceiveBudgetFraction is the share of the memory the process may
	// use (memsize.Usable) that the server-wide budget takes by default, as
	// the block cache does; at least ReceiveBudgetMessages messages of
	// MaxMessageBytes, and 1 GiB where the memory is unknown.
	ReceiveBudgetFraction = 8
	ReceiveBudgetMessages = 2
)

// DefaultReceiveBudget returns the server-wide receive budget for a
// machine of memory bytes (0: unknown) and a message limit.
func DefaultReceiveBudget(memory uint64, maxMessageBytes int) int64 {
	b := int64(1 << 30)
	if memory > 0 {
		b = int64(min(memory, 1<<62) / ReceiveBudgetFraction) //nolint:gosec // bounded just before
	}
	return max(b, ReceiveBudgetMessages*int64(maxMessageBytes))
}

// DefaultReceiveShare returns a connection's default share of the receive
// budget.
func DefaultReceiveShare(maxMessageBytes int, maxStreamsPerConn uint32) int64 {
	return int64(min(maxStreamsPerConn, ReceiveShareMessages)) * int64(maxMessageBytes)
}

// receiveDefaults sets the receive budget's zero settings; MaxMessageBytes
// and MaxStreamsPerConn have their defaults already.
func (c Config) receiveDefaults() Config {
	if c.MaxReceiveBufferBytes == 0 {
		c.MaxReceiveBufferBytes = DefaultReceiveBudget(memsize.Usable(), c.MaxMessageBytes)
	}
	if c.MaxReceiveBytesPerConn == 0 {
		c.MaxReceiveBytesPerConn = DefaultReceiveShare(c.MaxMessageBytes, c.MaxStreamsPerConn)
	}
	return c
}

// validateReceive refuses a receive budget or share that a message of
// MaxMessageBytes could not fit in: its connection would be closed before
// the message arrived.
func (c Config) validateReceive() error {
	msg := int64(c.MaxMessageBytes)
	if msg == 0 {
		msg = defaultMaxMessageBytes
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"MaxReceiveBufferBytes", c.MaxReceiveBufferBytes}, {"MaxReceiveBytesPerConn", c.MaxReceiveBytesPerConn}} {
		switch {
		case f.v < 0:
			return configError(f.name, " must not be negative")
		case f.v > 0 && f.v < msg:
			return configError(f.name, " must be at least ", "MaxMessageBytes", ": a message that large could never arrive")
		}
	}
	return nil
}

// newReceiveBudget is the gRPC listener's receive budget (see
// internal/recvbudget): plaintext connections are wrapped as they are
// accepted (receiveListener), TLS ones after their handshake (grpcCreds).
func (s *Server) newReceiveBudget() {
	s.recv = recvbudget.New(recvbudget.Options{
		Limit:  s.cfg.MaxReceiveBufferBytes,
		Share:  s.cfg.MaxReceiveBytesPerConn,
		Logger: s.log,
	})
}

// grpcListener is the listener the gRPC server serves: accounted by the
// receive budget, unless TLS is on and the credentials account each
// connection after its handshake.
func (s *Server) grpcListener() net.Listener {
	// Each connection's closing gives back what its queued responses
	// hold of the result budget (grpctransport.TrackConns).
	lis := s.svc.TrackConns(s.lis)
	if s.certs != nil {
		return lis
	}
	return s.recv.Listener(lis)
}

// registerReceiveMetrics exports the receive budget's figures.
func registerReceiveMetrics(reg *prometheus.Registry, b *recvbudget.Budget) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "protobase_receive_partial_bytes",
			Help: "Bytes of gRPC messages begun and not yet complete, over all connections (bounded by --max-receive-buffer-bytes)."},
			func() float64 { return float64(b.Held()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "protobase_receive_connections_closed_total",
			Help:        "gRPC connections closed for holding too many bytes of partial messages: over their share, or the largest holder when the server's budget was exceeded.",
			ConstLabels: prometheus.Labels{"reason": "share"}},
			func() float64 { s, _ := b.Closed(); return float64(s) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "protobase_receive_connections_closed_total",
			Help:        "gRPC connections closed for holding too many bytes of partial messages: over their share, or the largest holder when the server's budget was exceeded.",
			ConstLabels: prometheus.Labels{"reason": "budget"}},
			func() float64 { _, o := b.Closed(); return float64(o) }),
	)
}
