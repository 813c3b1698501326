package main

import (
	"context"
	"crypto/tls"
	"math/big"
	"syscall"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/certs/certstest"
	"github.com/protobase/protobase/internal/exitstatus"
)

// servedSerial returns the serial of the certificate addr presents.
func servedSerial(t *testing.T, addr string, cfg *tls.Config) *big.Int {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// The client commands reach a TLS server with --tls-ca (or
// $PROTOBASE_TLS_CA), and serve reloads its certificate on SIGHUP.
func TestServeTLS(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	cert := ca.Server(t, "server")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startServe(t, ctx, "--data", t.TempDir(), "--sync=false", "--lab",
		"--tls-cert", cert.CertFile, "--tls-key", cert.KeyFile)
	p := writeFile(t, t.TempDir(), "shop.proto", shopProto)

	r := cli(t, "", "--addr", addr, "schema", "apply", p)
	wantCode(t, r, exitstatus.Failed)
	mustCLI(t, "", "--addr", addr, "--tls-ca", ca.File, "schema", "apply", p)
	t.Setenv("PROTOBASE_TLS_CA", ca.File)
	mustCLI(t, `{"id": 1}`, "--addr", addr, "insert", "--type", "shop.User")
	r = mustCLI(t, "", "--addr", addr, "search", "--type", "shop.User")
	wantContains(t, r.stdout, `"id":"1"`)

	// SIGHUP reloads the files at once; the watcher would take up to 10 s
	// (its default interval), so a new certificate seen well within that
	// was SIGHUP's doing.
	next := ca.Server(t, "next")
	certstest.Install(t, next, cert)
	sent := time.Now()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for servedSerial(t, addr, ca.ClientConfig(t)).Cmp(next.Serial) != 0 {
		if time.Since(sent) > 5*time.Second {
			t.Fatal("SIGHUP did not reload the certificate")
		}
		time.Sleep(5 * time.Millisecond) // polling for the handler's outcome
	}
	mustCLI(t, "", "--addr", addr, "schema", "get")
	cancel()
	if code := <-done; code != exitstatus.OK {
		t.Fatalf("serve exited %d", code)
	}
}

func TestServeTLSFlagErrors(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	cert := ca.Server(t, "server")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", cert.CertFile}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-client-ca", ca.File}, "--tls-client-ca requires"},
		{[]string{"--nats-tls-ca", ca.File}, "need --nats-url"},
		{[]string{"--nats-url", "tls://127.0.0.1:1", "--nats-tls-cert", cert.CertFile}, "--nats-tls-cert and --nats-tls-key go together"},
		{[]string{"--http-allowed-origins", "https://a.example"}, "need --http-addr"},
	} {
		r := cli(t, "", append([]string{"serve", "--data", t.TempDir()}, tc.args...)...)
		wantCode(t, r, exitstatus.Usage)
		wantContains(t, r.stderr, tc.want)
	}
	r := cli(t, "", "--tls-ca", cert.KeyFile, "schema", "get")
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--tls-ca", "no PEM certificate")
	r = cli(t, "", "serve", "--data", t.TempDir(), "--grpc-addr", "127.0.0.1:0", "--tls-cert", cert.CertFile, "--tls-key", cert.CertFile)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "cannot start the server", "tls")
}
