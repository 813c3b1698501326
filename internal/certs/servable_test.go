package certs_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/certs"
	"github.com/protobase/protobase/internal/certs/certstest"
)

// warnings records the messages logged at warn and above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.msgs = append(w.msgs, msg)
	return nil
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// A certificate that clients would refuse is not taken by a reload: new
// handshakes keep getting the previous one, and the error says why.
func TestReloadKeepsServableCertificate(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	live := ca.Server(t, "server")
	r, err := certs.NewReloader(certs.Files{Cert: live.CertFile, Key: live.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	addr := serve(t, r.ServerConfig())
	now := time.Now()
	for _, tc := range []struct {
		name string
		opt  certstest.ServerOptions
		want string
	}{
		{"expired yesterday", certstest.ServerOptions{NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)}, "expired at"},
		{"not yet valid", certstest.ServerOptions{NotBefore: now.Add(time.Hour), NotAfter: now.Add(48 * time.Hour)}, "is not valid before"},
		{"other names", certstest.ServerOptions{DNSNames: []string{"db.example"}}, "does not cover localhost, 127.0.0.1, ::1"},
		{"one address less", certstest.ServerOptions{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv6loopback}}, "does not cover 127.0.0.1,"},
	} {
		certstest.Install(t, ca.ServerWith(t, strings.ReplaceAll(tc.name, " ", "-"), tc.opt), live)
		err := r.Reload()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Reload = %v, want an error containing %q", tc.name, err, tc.want)
		}
		c, err := dial(t, addr, ca.ClientConfig(t))
		if err != nil {
			t.Fatalf("%s: a new handshake after the refused reload: %v", tc.name, err)
		}
		if got := c.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(live.Serial) != 0 {
			t.Errorf("%s: served serial %v after the refused reload, want the previous %v", tc.name, got, live.Serial)
		}
	}
	if got := r.Refused(); got != 4 {
		t.Errorf("Refused = %d, want 4", got)
	}

	// More names, a wildcard among them, are fine.
	wider := ca.ServerWith(t, "wider", certstest.ServerOptions{DNSNames: []string{"localhost", "*.example"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)}})
	certstest.Install(t, wider, live)
	if err := r.Reload(); err != nil {
		t.Fatalf("a certificate covering more names: %v", err)
	}
	narrower := ca.ServerWith(t, "sub", certstest.ServerOptions{DNSNames: []string{"localhost", "db.example"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)}})
	certstest.Install(t, narrower, live)
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "*.example") {
		t.Fatalf("a certificate that drops a wildcard: %v, want an error naming *.example", err)
	}
}

// A server does not start on a certificate that clients would refuse.
func TestNewReloaderRefusesExpired(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	old := ca.ServerWith(t, "old", certstest.ServerOptions{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Minute)})
	_, err := certs.NewReloader(certs.Files{Cert: old.CertFile, Key: old.KeyFile}, nil)
	if err == nil || !strings.Contains(err.Error(), "expired at") {
		t.Fatalf("NewReloader with an expired certificate: %v, want an expired error", err)
	}
}

// Once the certificate served has expired, its names no longer bind the
// next one: it serves no one.
func TestReloadAfterExpiryTakesOtherNames(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	live := ca.Server(t, "server")
	r, err := certs.NewReloader(certs.Files{Cert: live.CertFile, Key: live.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	certs.SetClock(r, func() time.Time { return time.Now().Add(25 * time.Hour) })
	renewed := ca.ServerWith(t, "renewed", certstest.ServerOptions{DNSNames: []string{"db.example"}, NotAfter: time.Now().Add(72 * time.Hour)})
	certstest.Install(t, renewed, live)
	if err := r.Reload(); err != nil {
		t.Fatalf("renewing an expired certificate under other names: %v", err)
	}
	if r.Certificate().SerialNumber.Cmp(renewed.Serial) != 0 {
		t.Fatal("the renewed certificate is not served")
	}
}

// The watcher logs a refused certificate once per version of the files,
// at warn, and takes a certificate refused as not yet valid once it is.
func TestWatchWarnsOnceAndRetriesWhenValid(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	live := ca.Server(t, "server")
	logs := &warnings{}
	r, err := certs.NewReloader(certs.Files{Cert: live.CertFile, Key: live.KeyFile}, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	clock := time.Now()
	certs.SetClock(r, func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	r.Watch(5 * time.Millisecond)
	defer r.Close()

	early := ca.ServerWith(t, "early", certstest.ServerOptions{NotBefore: clock.Add(time.Hour), NotAfter: clock.Add(48 * time.Hour)})
	certstest.Install(t, early, live)
	deadline := time.Now().Add(10 * time.Second)
	notYet := func() (n int) {
		for _, m := range logs.all() {
			if strings.Contains(m, "TLS certificate not reloaded; keeping the previous certificate") && strings.Contains(m, "is not valid before") {
				n++
			}
		}
		return n
	}
	for notYet() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the refused certificate was not logged within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling for the watcher's outcome
	}
	// Many more ticks see the same files: no second line.
	for range 3 {
		if _, err := dial(t, serve(t, r.ServerConfig()), ca.ClientConfig(t)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // ticks of the watcher, which must stay quiet
	}
	// (Install writes the key first: the watcher may also have seen the
	// new key beside the old certificate, another version of the files.)
	if n := notYet(); n != 1 {
		t.Fatalf("warnings %q, want one saying the certificate is not valid yet", logs.all())
	}
	if r.Certificate().SerialNumber.Cmp(live.Serial) != 0 {
		t.Fatal("the certificate not valid yet is served")
	}

	mu.Lock()
	clock = clock.Add(2 * time.Hour)
	mu.Unlock()
	for r.Certificate().SerialNumber.Cmp(early.Serial) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the certificate was not taken once valid")
		}
		time.Sleep(5 * time.Millisecond) // polling for the watcher's outcome
	}
}
