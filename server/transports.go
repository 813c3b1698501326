package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/protobase/protobase/gen/openapi"
	"github.com/protobase/protobase/internal/console"
	"github.com/protobase/protobase/internal/transport/gateway"
	grpctransport "github.com/protobase/protobase/internal/transport/grpc"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/internal/transport/schemajson"
)

// transports are the optional fronts beside gRPC: the REST/JSON gateway
// and the NATS service. Each is nil when not configured.
type transports struct {
	http    *http.Server
	hlis    net.Listener
	hcancel context.CancelFunc // cancels the contexts of HTTP requests
	hreqs   *requestGroup

	ns        *natsserver.Server  // embedded NATS server, when Config.NATS
	natsAuth  *natstransport.Auth // its client authentication
	nc        *nats.Conn
	natsSvc   *natstransport.Service
	natsStats natstransport.Stats // exported as metrics from start-up
}

// startTransports starts the REST gateway and the NATS service when
// configured. On error, whatever it started is stopped again.
func (s *Server) startTransports() (err error) {
	defer func() {
		if err != nil {
			s.stopTransports(context.Background())
		}
	}()
	svc := s.svc
	res := schemajson.New(func() *protoregistry.Files { return s.eng.Schema().Compiled.Registry })
	if s.cfg.HTTPAddr != "" {
		if err := s.startHTTP(svc, res); err != nil {
			return err
		}
	}
	if s.cfg.NATS || s.cfg.NATSURL != "" {
		if err := s.startNATS(res); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) startHTTP(svc *grpctransport.Service, res *schemajson.Resolver) error {
	gopts := gateway.Options{
		Service:         svc,
		Resolver:        res,
		MaxMessageBytes: s.cfg.MaxMessageBytes,
		Transcode:       s.eng.TranscodeHold,
		OpenAPI:         openapi.Spec,
		AllowedOrigins:  s.cfg.HTTPAllowedOrigins,
		AllowedHosts:    s.cfg.HTTPAllowedHosts,
	}
	if s.auth {
		gopts.Verifier = s.keys
	}
	gw, err := gateway.New(gopts)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	t := &s.tr
	t.hlis = s.capConnections(lis, "http")
	t.hreqs = &requestGroup{}
	ctx, cancel := context.WithCancel(context.Background())
	t.hcancel = cancel
	// HTTP/1.1 and HTTP/2 on one listener (cleartext HTTP/2 by prior
	// knowledge without TLS), with net/http's own HTTP/2: x/net's h2c
	// package is deprecated for this, and it reads a whole Upgrade request
	// into memory.
	t.http = &http.Server{
		Handler:     t.hreqs.wrap(s.tracing.httpHandler(s.httpRoutes(gw))),
		Protocols:   s.httpProtocols(),
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	s.cfg.HTTPLimits.apply(t.http)
	go func() { _ = s.serveHTTP(t.http, t.hlis) }()
	s.log.Info("serving REST/JSON", "http", lis.Addr().String(), "tls", s.TLS())
	return nil
}

// httpRoutes is what the HTTP listener serves: the web console's assets at
// /console/ and the metrics at /metrics beside the REST API, all behind
// the gateway's guard (Host and Origin checks). The console's health page
// reads the metrics from its own origin; they need a key as on the
// metrics listener. Paths are matched as sent: the API's routes never
// see a path rewritten by a mux.
func (s *Server) httpRoutes(gw *gateway.Gateway) http.Handler {
	con := gw.Guard(console.New())
	met := gw.Guard(s.metricsHTTP)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/console" || strings.HasPrefix(p, console.Prefix):
			con.ServeHTTP(w, r)
		case p == "/metrics":
			met.ServeHTTP(w, r)
		default:
			gw.ServeHTTP(w, r)
		}
	})
}

func (s *Server) startNATS(res *schemajson.Resolver) error {
	t := &s.tr
	copts := natstransport.ConnOptions(s.log, &t.natsStats)
	// On a NATS server Protobase did not configure it cannot know the
	// callers' inboxes; on its own it does (see natstransport.Replies).
	replies := natstransport.RepliesAnyInbox
	if s.cfg.NATS {
		eo, auth, err := s.embeddedNATS()
		if err != nil {
			return err
		}
		if t.ns, err = natstransport.RunEmbedded(eo); err != nil {
			return err
		}
		t.natsAuth = auth
		s.watchNATSRevocations()
		replies = natstransport.RepliesSharedInbox
		if s.auth {
			replies = natstransport.RepliesKeyInbox
		}
		copts = append(copts, natstransport.InProcess(t.ns)...)
		t.nc, err = nats.Connect("nats://in-process", append(copts, auth.ServiceOption())...)
		if err != nil {
			return fmt.Errorf("connect to nats: %w", err)
		}
	} else {
		xo, err := s.externalNATSOptions()
		if err != nil {
			return err
		}
		// An external server may restart: the connection keeps
		// reconnecting for as long as we serve (ConnOptions).
		t.nc, err = nats.Connect(s.cfg.NATSURL, append(copts, xo...)...)
		if err != nil {
			return fmt.Errorf("connect to nats: %w", err)
		}
	}
	var err error
	t.natsSvc, err = natstransport.Start(natstransport.Options{
		Conn:            t.nc,
		Engine:          s.eng,
		Resolver:        res,
		Prefix:          s.cfg.NATSPrefix,
		Queue:           s.cfg.NATSQueue,
		MaxMessageBytes: s.cfg.MaxMessageBytes,
		Replies:         replies,
		Stats:           &t.natsStats,
		Logger:          s.log,
		Keys:            s.keys,
		Auth:            s.auth,
		// A key flooding the embedded server is cut off at its source.
		KeyBytesPerSecond: s.cfg.NATSKeyBytesPerSecond,
		OnFlood:           s.natsKeyFlooding,
	})
	if err != nil {
		return err
	}
	s.log.Info("serving NATS", "url", s.NATSURL(), "prefix", s.cfg.NATSPrefix, "queue", s.cfg.NATSQueue)
	return nil
}

// stopTransports stops taking requests on REST and NATS and waits for the
// running ones until ctx ends, then cuts them and waits for their handlers
// to return: afterwards nothing of theirs touches the engine.
func (s *Server) stopTransports(ctx context.Context) {
	t := &s.tr
	if t.natsSvc != nil {
		if err := t.natsSvc.Stop(); err != nil {
			s.log.Warn("stop nats service", "err", err)
		}
	}
	if t.nc != nil {
		t.nc.Close()
	}
	if t.ns != nil {
		t.ns.Shutdown()
		t.ns.WaitForShutdown()
	}
	if t.http != nil {
		if err := t.http.Shutdown(ctx); err != nil {
			s.log.Warn("graceful HTTP stop timed out; closing remaining requests")
			_ = t.http.Close()
		}
		t.hcancel()
		t.hreqs.wait()
	}
}

// HTTPAddr returns the REST listen address (with the real port when 0 was
// asked), or "" when REST is off.
func (s *Server) HTTPAddr() string {
	if s.tr.hlis == nil {
		return ""
	}
	return s.tr.hlis.Addr().String()
}

// NATSURL returns the URL of the NATS server the service is on: the
// embedded server's client URL (with the real port when 0 was asked) or
// Config.NATSURL with any password masked (it is printed and logged);
// "" when NATS is off.
func (s *Server) NATSURL() string {
	switch {
	case s.tr.ns != nil:
		return s.tr.ns.ClientURL()
	case s.tr.nc != nil:
		return natstransport.RedactURL(s.cfg.NATSURL)
	}
	return ""
}

// requestGroup counts running HTTP handlers so that Stop can wait for
// them even after http.Server.Close, which does not. Once wait has begun,
// new requests are refused.
type requestGroup struct {
	mu      sync.Mutex
	closing bool
	wg      sync.WaitGroup
}

func (g *requestGroup) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		if g.closing {
			g.mu.Unlock()
			http.Error(w, "the server is stopping", http.StatusServiceUnavailable)
			return
		}
		g.wg.Add(1)
		g.mu.Unlock()
		defer g.wg.Done()
		h.ServeHTTP(w, r)
	})
}

func (g *requestGroup) wait() {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	g.wg.Wait()
}
