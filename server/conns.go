package server

import (
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/protobase/protobase/internal/connlimit"
)

// Connection bounds (docs/limits.md, "Connections"): what a client may
// hold by connecting and saying nothing, or nothing more.
const (
	// DefaultHandshakeTimeout is Config.HandshakeTimeout's default: the
	// time a new connection has for its TLS handshake and its protocol's
	// opening. It is also net/http's fixed bound on an HTTP/2 client's
	// preface, so every listener allows the same.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultIdleTimeout is Config.IdleTimeout's default: a gRPC
	// connection without streams, or an HTTP connection between
	// requests, is closed after it. Clients reconnect when they next call.
	DefaultIdleTimeout = 120 * time.Second
)

// DefaultMaxConnections returns Config.MaxConnections' default for this
// process: a quarter of what its file-descriptor limit leaves after the
// store's files, at most 10,000 (see connlimit.Default).
func DefaultMaxConnections() int { return connlimit.Default(connlimit.FileLimit()) }

// connDefaults sets the connection bounds' zero settings.
func (c Config) connDefaults() Config {
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections()
	}
	return c
}

// connListeners are the server's capped listeners, in the order they
// were bound; the metrics read them at scrape time.
type connListeners struct {
	mu sync.Mutex
	ls []*connlimit.Listener
}

// capConnections returns lis holding at most Config.MaxConnections
// connections open (none when it is negative), counted under name in the
// metrics and the log.
func (s *Server) capConnections(lis net.Listener, name string) net.Listener {
	l := connlimit.Wrap(lis, name, max(s.cfg.MaxConnections, 0), s.log)
	s.conns.mu.Lock()
	s.conns.ls = append(s.conns.ls, l)
	s.conns.mu.Unlock()
	return l
}

var connDescs = struct{ open, refused, limit *prometheus.Desc }{
	open: prometheus.NewDesc("protobase_connections_open",
		"Connections open on the listener (grpc, http, metrics), bounded by --max-connections.", []string{"listener"}, nil),
	refused: prometheus.NewDesc("protobase_connections_refused_total",
		"Connections closed as soon as they were accepted, the listener holding --max-connections already.", []string{"listener"}, nil),
	limit: prometheus.NewDesc("protobase_connections_limit",
		"The most connections each listener holds open (--max-connections); 0: no cap.", nil, nil),
}

// registerConnMetrics exports each capped listener's figures. Every
// listener of the Config has its series from the first scrape: the
// gRPC and metrics listeners are bound before this, REST before Start
// returns.
func (s *Server) registerConnMetrics(reg *prometheus.Registry) {
	reg.MustRegister(connCollector{s})
}

type connCollector struct{ s *Server }

func (c connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connDescs.open
	ch <- connDescs.refused
	ch <- connDescs.limit
}

func (c connCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.conns.mu.Lock()
	ls := c.s.conns.ls
	c.s.conns.mu.Unlock()
	for _, l := range ls {
		name := l.Name()
		ch <- prometheus.MustNewConstMetric(connDescs.open, prometheus.GaugeValue, float64(l.Open()), name)
		ch <- prometheus.MustNewConstMetric(connDescs.refused, prometheus.CounterValue, float64(l.Refused()), name)
	}
	ch <- prometheus.MustNewConstMetric(connDescs.limit, prometheus.GaugeValue, float64(max(c.s.cfg.MaxConnections, 0)))
}
