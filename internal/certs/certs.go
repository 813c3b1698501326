// Package certs owns Protobase's TLS material: the server certificate and
// key read from PEM files and reloaded when the files change (or on
// demand, for SIGHUP), the pool of client CAs that mutual TLS verifies
// against, and the tls.Config of servers and clients built from them.
//
// A reload swaps what later handshakes see; connections already
// established keep the certificate they were set up with, so nothing is
// dropped. A reload that fails (a half-written file, a key that does not
// match the certificate) keeps the previous material and reports the error.
// So does a certificate that clients would refuse where the previous one
// works: one outside its validity period (expired, or not yet valid), or
// one that no longer covers every DNS name and IP address the previous
// one served (see checkServable). Taking either would turn away every new
// client on every listener at once.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Files names the PEM files of a server's TLS material.
type Files struct {
	// Cert and Key are the certificate (chain) and its private key.
	Cert, Key string
	// ClientCA, when set, turns on mutual TLS: a client must present a
	// certificate issued by one of the CAs in this file.
	ClientCA string
}

// Reloader holds a server's current certificate and client CA pool.
// GetCertificate and the verification of client certificates read them
// under mu; Reload replaces them whole, so a handshake sees either the old
// material or the new, never a mix.
type Reloader struct {
	files Files
	log   *slog.Logger

	loadMu sync.Mutex // serializes load: SIGHUP and the watcher may reload at once

	mu        sync.RWMutex // guards cert, clientCAs, stamp, failed, retryAt
	cert      *tls.Certificate
	clientCAs *x509.CertPool // nil without Files.ClientCA
	stamp     stamp          // of the files loaded last
	failed    stamp          // of the files whose reload failed last, so it is logged once
	// retryAt, when set, is when the files of failed become worth loading
	// again: the NotBefore of a certificate refused as not yet valid.
	retryAt time.Time

	refused atomic.Uint64 // reloads refused, for Refused
	now     func() time.Time

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// stamp identifies a version of the files by size and modification time,
// which is what a stat can tell without reading them.
type stamp [3]struct {
	size int64
	mod  time.Time
}

// NewReloader loads files; an error names the file at fault. log receives
// reload failures and successes (nil discards them).
func NewReloader(files Files, log *slog.Logger) (*Reloader, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("tls: a certificate file and a key file are both required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{files: files, log: log, now: time.Now}
	if err := r.load(r.statFiles()); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again and, when they load and pass
// checkServable, makes them current. On error the previous material stays
// in use, and the watcher does not log this version of the files again.
func (r *Reloader) Reload() error {
	st := r.statFiles()
	err := r.load(st)
	if err != nil {
		r.refused.Add(1)
	}
	return err
}

// load reads the files stamped st and makes them current, or records them
// as failed.
func (r *Reloader) load(st stamp) error {
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	cert, pool, err := r.read()
	if err == nil {
		r.mu.RLock()
		prev := r.cert
		r.mu.RUnlock()
		err = checkServable(cert.Leaf, prev, r.now())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.failed, r.retryAt = st, time.Time{}
		var early *notYetValidError
		if errors.As(err, &early) {
			r.retryAt = early.notBefore
		}
		return err
	}
	r.cert, r.clientCAs, r.stamp = cert, pool, st
	r.failed, r.retryAt = stamp{}, time.Time{}
	return nil
}

// read loads the certificate, its key and the client CAs from the files.
func (r *Reloader) read() (*tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: load %s and %s: %w", r.files.Cert, r.files.Key, err)
	}
	if cert.Leaf == nil { // only with GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("tls: parse %s: %w", r.files.Cert, err)
		}
	}
	var pool *x509.CertPool
	if r.files.ClientCA != "" {
		if pool, err = LoadPool(r.files.ClientCA); err != nil {
			return nil, nil, err
		}
	}
	return &cert, pool, nil
}

// Watch checks the files every interval and reloads them when their size
// or modification time changed, until Close. A failed reload is logged
// once per version of the files and retried when they change again.
func (r *Reloader) Watch(interval time.Duration) {
	if interval <= 0 {
		return
	}
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				r.reloadIfChanged()
			}
		}
	}()
}

func (r *Reloader) reloadIfChanged() {
	st := r.statFiles()
	r.mu.RLock()
	// A certificate refused as not yet valid is tried again once it is.
	same := st == r.stamp || (st == r.failed && (r.retryAt.IsZero() || r.now().Before(r.retryAt)))
	r.mu.RUnlock()
	if same {
		return
	}
	if err := r.Reload(); err != nil {
		r.log.Warn("TLS certificate not reloaded; keeping the previous certificate", "err", err)
		return
	}
	leaf := r.Certificate()
	r.log.Info("TLS certificate reloaded", "cert", r.files.Cert, "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter)
}

// statFiles stamps the files; a file that cannot be stat'ed stamps as
// zero, which differs from any loaded version and so is retried.
func (r *Reloader) statFiles() stamp {
	var st stamp
	for i, name := range []string{r.files.Cert, r.files.Key, r.files.ClientCA} {
		if name == "" {
			continue
		}
		if fi, err := os.Stat(name); err == nil {
			st[i].size, st[i].mod = fi.Size(), fi.ModTime()
		}
	}
	return st
}

// Close stops Watch. Safe to call more than once, and without Watch.
func (r *Reloader) Close() {
	r.stopOnce.Do(func() {
		if r.stop != nil {
			close(r.stop)
			<-r.done
		}
	})
}

// GetCertificate returns the current certificate, for tls.Config.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, nil
}

// Certificate returns the current certificate's leaf.
func (r *Reloader) Certificate() *x509.Certificate {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert.Leaf
}

// Refused counts the reloads refused since NewReloader: files that do not
// load, or a certificate that checkServable refuses.
func (r *Reloader) Refused() uint64 { return r.refused.Load() }

// MutualTLS reports whether clients must present a certificate.
func (r *Reloader) MutualTLS() bool { return r.files.ClientCA != "" }

// ServerConfig returns a server tls.Config (TLS 1.2 or later) serving the
// current certificate and, with a client CA file, requiring a client
// certificate issued by the current client CAs. Each listener takes its
// own: callers add their ALPN protocols to it.
//
// Client certificates are verified in VerifyConnection rather than by
// crypto/tls's ClientCAs, because ClientCAs is fixed once the config is in
// use and the pool must follow reloads.
func (r *Reloader) ServerConfig() *tls.Config {
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
	}
	if r.MutualTLS() {
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.VerifyConnection = r.verifyClient
	}
	return cfg
}

// verifyClient checks the client's chain against the current client CAs.
func (r *Reloader) verifyClient(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: a client certificate is required")
	}
	r.mu.RLock()
	pool := r.clientCAs
	r.mu.RUnlock()
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("tls: client certificate: %w", err)
	}
	return nil
}

// LoadPool reads a PEM file of CA certificates into a pool.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// ClientConfig returns a client tls.Config (TLS 1.2 or later) that trusts
// the CAs of caFile, or the system's roots when caFile is "". With certFile
// and keyFile it presents that certificate, for mutual TLS.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := LoadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("tls: a client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load %s and %s: %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
