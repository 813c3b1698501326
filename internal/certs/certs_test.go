package certs_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/certs"
	"github.com/protobase/protobase/internal/certs/certstest"
)

// serve accepts TLS connections on a loopback listener and echoes what
// each sends, until the test ends.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return lis.Addr().String()
}

// dial handshakes and returns the connection and the serial of the
// server certificate it saw.
func dial(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	// TLS 1.3 reports a refused client certificate only on the first read.
	if _, err := c.Write([]byte("x")); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		c.Close()
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

func TestReloadKeepsConnectionsAndServesNewCertificate(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	live := ca.Server(t, "server")
	r, err := certs.NewReloader(certs.Files{Cert: live.CertFile, Key: live.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := serve(t, r.ServerConfig())
	old, err := dial(t, addr, ca.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := old.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(live.Serial) != 0 {
		t.Fatalf("served serial %v, want %v", got, live.Serial)
	}

	next := ca.Server(t, "next")
	certstest.Install(t, next, live)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	c, err := dial(t, addr, ca.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(next.Serial) != 0 {
		t.Fatalf("after reload served serial %v, want %v", got, next.Serial)
	}
	// The connection made before the reload still works.
	if _, err := old.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(old, make([]byte, 1)); err != nil {
		t.Fatalf("old connection after reload: %v", err)
	}
}

func TestWatchReloadsChangedFiles(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	live := ca.Server(t, "server")
	r, err := certs.NewReloader(certs.Files{Cert: live.CertFile, Key: live.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Watch(5 * time.Millisecond)
	defer r.Close()

	// A broken certificate file is not taken: the old one stays.
	if err := os.WriteFile(live.CertFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	next := ca.Server(t, "next")
	certstest.Install(t, next, live)
	deadline := time.Now().Add(10 * time.Second)
	for r.Certificate().SerialNumber.Cmp(next.Serial) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the changed certificate was not picked up within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling for an outcome, not ordering
	}
}

func TestBadFilesFailClearly(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	p := ca.Server(t, "server")
	other := ca.Server(t, "other")
	for name, f := range map[string]certs.Files{
		"missing cert":      {Cert: p.CertFile + ".none", Key: p.KeyFile},
		"mismatched key":    {Cert: p.CertFile, Key: other.KeyFile},
		"client CA not PEM": {Cert: p.CertFile, Key: p.KeyFile, ClientCA: p.KeyFile},
		"no key":            {Cert: p.CertFile},
	} {
		if _, err := certs.NewReloader(f, nil); err == nil || !strings.Contains(err.Error(), "tls") {
			t.Errorf("%s: err %v, want a tls error", name, err)
		}
	}
	if _, err := certs.ClientConfig(p.CertFile+".none", "", ""); err == nil {
		t.Error("ClientConfig with a missing CA file: no error")
	}
}

func TestMutualTLS(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	rogue := certstest.NewCA(t, "rogue")
	p := ca.Server(t, "server")
	r, err := certs.NewReloader(certs.Files{Cert: p.CertFile, Key: p.KeyFile, ClientCA: ca.File}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.ServerConfig())
	if _, err := dial(t, addr, ca.ClientConfig(t, ca.Client(t, "alice", "alice"))); err != nil {
		t.Fatalf("client with a certificate of the CA: %v", err)
	}
	if _, err := dial(t, addr, ca.ClientConfig(t)); err == nil {
		t.Fatal("client without a certificate was accepted")
	}
	if _, err := dial(t, addr, ca.ClientConfig(t, rogue.Client(t, "mallory", "mallory"))); err == nil {
		t.Fatal("client with a certificate of another CA was accepted")
	}
	// A server certificate is not a client certificate.
	if _, err := dial(t, addr, ca.ClientConfig(t, ca.Server(t, "srv2"))); err == nil {
		t.Fatal("client presenting a server-only certificate was accepted")
	}
	// Plaintext to the TLS listener fails rather than hanging.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	if _, err := io.ReadAll(c); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("plaintext connection hung instead of being closed")
	}
}
