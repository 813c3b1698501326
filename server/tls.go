package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/certs"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
)

// defaultTLSReloadInterval is how often the certificate files are checked
// for changes when Config.TLSReloadInterval is 0.
const defaultTLSReloadInterval = 10 * time.Second

// startTLS loads the certificate when TLS is configured and starts
// watching its files.
func (s *Server) startTLS() error {
	c := s.cfg
	if c.TLSCertFile == "" { // Validate has checked the files go together
		return nil
	}
	r, err := certs.NewReloader(certs.Files{Cert: c.TLSCertFile, Key: c.TLSKeyFile, ClientCA: c.TLSClientCAFile}, s.log)
	if err != nil {
		return err
	}
	interval := c.TLSReloadInterval
	if interval == 0 {
		interval = defaultTLSReloadInterval
	}
	r.Watch(interval)
	s.certs = r
	s.log.Info("TLS on", "cert", c.TLSCertFile, "mutual", r.MutualTLS())
	return nil
}

// ReloadTLS reads the certificate, key and client CA files again (serve
// calls it on SIGHUP). Connections already open keep their session; new
// handshakes get the new material. On error the old material stays: files
// that do not load, and a certificate that clients would refuse (expired,
// not yet valid, or no longer covering the names the current one covers;
// see internal/certs).
func (s *Server) ReloadTLS() error {
	if s.certs == nil {
		return errors.New("server: TLS is not configured")
	}
	return s.certs.Reload()
}

// registerTLSMetrics adds the served certificate's series, with TLS on.
func (s *Server) registerTLSMetrics(reg *prometheus.Registry) {
	if s.certs == nil {
		return
	}
	r := s.certs
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "protobase_tls_certificate_expiry_seconds",
			Help: "When the certificate served expires, in Unix seconds."},
			func() float64 { return float64(r.Certificate().NotAfter.Unix()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "protobase_tls_reloads_refused_total",
			Help: "Reloads of the TLS files refused (files that do not load, or a certificate clients would refuse); the previous certificate stays."},
			func() float64 { return float64(r.Refused()) }),
	)
}

// TLS reports whether the listeners serve TLS.
func (s *Server) TLS() bool { return s.certs != nil }

// grpcCreds is the gRPC server's transport credentials option, or none.
func (s *Server) grpcCreds() []grpc.ServerOption {
	if s.certs == nil {
		return nil
	}
	// The receive budget reads each connection's HTTP/2 after the
	// handshake (recvbudget.go). The handshake is bounded with the
	// preface (boundOptions).
	return []grpc.ServerOption{grpc.Creds(s.recv.Credentials(credentials.NewTLS(s.certs.ServerConfig())))}
}

// serveHTTP serves hs on lis, over TLS when configured (HTTP/2 and
// HTTP/1.1 by ALPN, as hs.Protocols allows).
func (s *Server) serveHTTP(hs *http.Server, lis net.Listener) error {
	// Failed handshakes (a plaintext client, an unknown client
	// certificate) are the client's problem: debug level.
	hs.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	if s.certs == nil {
		return hs.Serve(lis)
	}
	hs.TLSConfig = s.certs.ServerConfig()
	return hs.ServeTLS(lis, "", "")
}

// httpProtocols are those of the REST listener: HTTP/1.1 and HTTP/2,
// the latter over TLS or, without it, cleartext with prior knowledge.
func (s *Server) httpProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	if s.certs != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return &p
}

// embeddedNATS returns the options of the embedded NATS server: TLS as
// the other listeners, and client authentication (see natstransport.Auth).
func (s *Server) embeddedNATS() (natstransport.EmbedOptions, *natstransport.Auth, error) {
	na, err := natstransport.NewAuth(s.cfg.NATSPrefix, s.natsKeyChecker())
	if err != nil {
		return natstransport.EmbedOptions{}, nil, err
	}
	o := natstransport.EmbedOptions{
		Addr:             s.cfg.NATSAddr,
		MaxPayload:       s.cfg.MaxMessageBytes,
		Auth:             na,
		HandshakeTimeout: s.cfg.HandshakeTimeout,
		MaxConns:         s.cfg.MaxConnections,
	}
	if s.certs != nil {
		o.TLS = s.certs.ServerConfig()
	}
	return o, na, nil
}

// natsKeyChecker is the one place where Protobase's authentication meets
// the embedded NATS server's login: a client logs in with an API key the
// keyring knows, and its role bounds the subjects the connection may
// publish to (each request's Authorization header then decides what that
// request may do). Nil while authentication is off.
func (s *Server) natsKeyChecker() natstransport.KeyChecker {
	if !s.auth {
		return nil
	}
	keys := s.keys
	return func(ctx context.Context, key string) (string, auth.Role, error) {
		id, err := keys.Verify(ctx, key)
		if err != nil {
			return "", auth.RoleNone, err
		}
		return id.Name, id.Role, nil
	}
}

// watchNATSRevocations makes every key revocation, on any transport, close
// the embedded NATS server's connections logged in with that key: a NATS
// login is checked once, when the client connects. Called once the
// embedded server runs.
func (s *Server) watchNATSRevocations() {
	if s.auth {
		s.keys.OnRevoke(s.natsKeyRevoked)
	}
}

// natsKeyFlooding closes the embedded NATS server's connections logged in
// with the key named name, which sends faster than its bound: a client
// that reconnects is checked again, and cut off again if it goes on.
func (s *Server) natsKeyFlooding(name string) {
	if s.tr.ns == nil || s.tr.natsAuth == nil {
		return
	}
	if _, err := s.tr.natsAuth.Disconnect(s.tr.ns, name); err != nil {
		s.log.Warn("disconnect NATS clients of a flooding key", "key", name, "err", err)
	}
}

// natsKeyRevoked closes the embedded NATS server's connections logged in
// with the key named name.
func (s *Server) natsKeyRevoked(name string) {
	if s.tr.ns == nil || s.tr.natsAuth == nil {
		return
	}
	n, err := s.tr.natsAuth.Disconnect(s.tr.ns, name)
	if err != nil {
		s.log.Warn("disconnect NATS clients of a revoked key", "key", name, "err", err)
		return
	}
	if n > 0 {
		s.log.Info("disconnected NATS clients of a revoked key", "key", name, "connections", n)
	}
}

// externalNATSOptions are the TLS options of the connection to an
// external NATS server (Config.NATSTLSCAFile and the client certificate).
func (s *Server) externalNATSOptions() ([]nats.Option, error) {
	c := s.cfg
	if c.NATSTLSCAFile == "" && c.NATSTLSCertFile == "" && c.NATSTLSKeyFile == "" {
		return nil, nil
	}
	cfg, err := certs.ClientConfig(c.NATSTLSCAFile, c.NATSTLSCertFile, c.NATSTLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	return []nats.Option{nats.Secure(cfg)}, nil
}

// closeTLS stops watching the certificate files.
func (s *Server) closeTLS() {
	if s.certs != nil {
		s.certs.Close()
	}
}
