package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/pebble"
)

// The storage backends Config.Store names.
const (
	// StorePebble keeps the data in DataDir on this machine (the default).
	StorePebble = "pebble"
	// StoreEtcd keeps the data in an etcd v3 cluster that several servers
	// may share; DataDir then holds only the admin key file.
	StoreEtcd = "etcd"
)

// EtcdConfig says how to reach the etcd cluster of Config.Store "etcd".
type EtcdConfig struct {
	// Endpoints are the members' client addresses: HOST:PORT, or URLs
	// (http:// or https://).
	Endpoints []string
	// Prefix starts every key Protobase writes (default "/protobase/"), so
	// one cluster can hold several stores.
	Prefix string
	// CAFile (PEM) verifies the members' certificates and turns TLS on;
	// CertFile and KeyFile present a client certificate.
	CAFile, CertFile, KeyFile string
	// User and PasswordFile authenticate to a cluster with auth enabled;
	// the file holds the password (a trailing newline is ignored).
	User, PasswordFile string
	// RequestTimeout bounds each attempt of a request to the cluster (0:
	// 30 s).
	RequestTimeout time.Duration
	// RetryTimeout bounds how long a request the cluster does not serve
	// (no leader, a member lost, no answer) is attempted again (0: 30 s;
	// negative: once). Past it a read fails UNAVAILABLE, and so does a
	// write batch that certainly was not applied; one that may have been
	// fails DEADLINE_EXCEEDED.
	RetryTimeout time.Duration
}

func (e EtcdConfig) set() bool {
	return len(e.Endpoints) > 0 || e.Prefix != "" || e.CAFile != "" || e.CertFile != "" ||
		e.KeyFile != "" || e.User != "" || e.PasswordFile != ""
}

// validateStorage checks Store and Etcd.
func (c Config) validateStorage() error {
	switch c.Store {
	case "", StorePebble:
		if c.Etcd.set() {
			return configError("Etcd", " only apply with ", "Store", " etcd")
		}
		return nil
	case StoreEtcd:
	default:
		return configError("Store", " "+quoteValue(c.Store)+": want pebble or etcd")
	}
	e := c.Etcd
	switch {
	case len(e.Endpoints) == 0:
		return configError("Etcd.Endpoints", " must name at least one etcd member (HOST:PORT) with ", "Store", " etcd")
	case (e.CertFile == "") != (e.KeyFile == ""):
		return configError("Etcd.CertFile", " and ", "Etcd.KeyFile", " go together")
	case (e.User == "") != (e.PasswordFile == ""):
		return configError("Etcd.User", " and ", "Etcd.PasswordFile", " go together")
	case e.Prefix != "" && !strings.HasPrefix(e.Prefix, "/"):
		return configError("Etcd.Prefix", " "+quoteValue(e.Prefix)+": want a key prefix starting with /")
	case c.NoSync:
		return configError("NoSync", " applies to Pebble: etcd commits every batch to a majority of its members")
	case c.CacheBytes != 0:
		return configError("CacheBytes", " applies to Pebble, not to ", "Store", " etcd")
	case c.MemTableBytes != 0:
		return configError("MemTableBytes", " applies to Pebble, not to ", "Store", " etcd")
	}
	for _, ep := range e.Endpoints {
		if err := validEndpoint(ep); err != nil {
			return configError("Etcd.Endpoints", " "+quoteValue(ep)+": "+err.Error())
		}
	}
	return nil
}

// validEndpoint accepts HOST:PORT or an http(s) URL with a host and port.
func validEndpoint(ep string) error {
	host := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") || u.User != nil {
			return fmt.Errorf("want HOST:PORT or http(s)://HOST:PORT")
		}
		host = u.Host
	}
	h, port, err := net.SplitHostPort(host)
	// 253: the longest DNS name.
	if err != nil || h == "" || len(h) > 253 || port == "" || strings.ContainsAny(h, " \t\r\n,/") {
		return fmt.Errorf("want HOST:PORT or http(s)://HOST:PORT")
	}
	return nil
}

func quoteValue(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// Compact compacts the server's whole store into one sorted run, waiting
// until it is done (a store without compaction, etcd, returns nil at
// once). It is for bulk loads and benchmarks: after loading a large data
// set, reads then meet the steady state (no compaction running, no
// overlapping files) instead of the hours after the load; a serving
// server compacts in the background on its own and needs no call.
func (s *Server) Compact(ctx context.Context) error {
	if err := s.eng.Compact(ctx); err != nil {
		return fmt.Errorf("compact the store: %w", err)
	}
	return nil
}

// openStore opens the configured backend.
func (s *Server) openStore() (store.KV, error) {
	cfg := s.cfg
	if cfg.Store != StoreEtcd {
		return pebble.Open(pebble.Options{Dir: cfg.DataDir, Layout: keyspace.Layout{}, FS: cfg.memFS, Sync: !cfg.NoSync, CacheBytes: cfg.CacheBytes, MemTableBytes: cfg.MemTableBytes, Logger: s.log})
	}
	return openEtcd(cfg.Etcd, s.log)
}

// openEtcd connects to the etcd cluster e names; log (nil: none) gets the
// store's warnings about a cluster that does not answer.
func openEtcd(e EtcdConfig, log *slog.Logger) (*etcd.Store, error) {
	o := etcd.Options{Endpoints: e.Endpoints, Prefix: e.Prefix, Username: e.User, RequestTimeout: e.RequestTimeout,
		RetryTimeout: e.RetryTimeout, Logger: log}
	if e.PasswordFile != "" {
		pw, err := os.ReadFile(e.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("read the etcd password file: %w", err)
		}
		o.Password = strings.TrimRight(string(pw), "\r\n")
	}
	if e.CAFile != "" || e.CertFile != "" {
		tc, err := etcdTLS(e)
		if err != nil {
			return nil, err
		}
		o.TLS = tc
	}
	return etcd.Open(o)
}

// etcdTLS builds the client TLS configuration for the etcd members.
func etcdTLS(e EtcdConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the etcd CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA file %s holds no PEM certificate", e.CAFile)
		}
	}
	if e.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load the etcd client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
