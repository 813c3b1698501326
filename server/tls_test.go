package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/certs"
	"github.com/protobase/protobase/internal/certs/certstest"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// tlsServer is a server with TLS on gRPC, REST, metrics and embedded NATS.
type tlsServer struct {
	*testServer
	ca   *certstest.CA
	cert certstest.Pair // the files the server was started with
}

// startTLSServer starts a TLS server with the schema applied, through a
// client that trusts ca and presents clientCerts.
func startTLSServer(t *testing.T, cfg server.Config, mutual bool) *tlsServer {
	t.Helper()
	ca := certstest.NewCA(t, "test")
	cert := ca.Server(t, "server")
	cfg.DataDir = t.TempDir()
	cfg.GRPCAddr, cfg.HTTPAddr, cfg.MetricsAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.NATS, cfg.NATSAddr = true, "127.0.0.1:0"
	cfg.TLSCertFile, cfg.TLSKeyFile = cert.CertFile, cert.KeyFile
	var clientCerts []certstest.Pair
	if mutual {
		cfg.TLSClientCAFile = ca.File
		clientCerts = append(clientCerts, ca.Client(t, "client", "client"))
	}
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	c, err := client.Dial(srv.Addr(), client.WithTLS(ca.ClientConfig(t, clientCerts...)))
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{servertest.With(t, srv, cfg, c)}
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	return &tlsServer{testServer: ts, ca: ca, cert: cert}
}

// httpsClient returns an HTTP client over TLS (HTTP/2 by ALPN) with cfg.
func httpsClient(t *testing.T, cfg *tls.Config) *http.Client {
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// get fetches url and returns the status code and protocol, or the error.
func get(hc *http.Client, url string) (int, int, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.ProtoMajor, nil
}

// schemaOverGRPC calls GetSchema through c with a bounded wait.
func schemaOverGRPC(c *client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.GetSchema(ctx)
	return err
}

// schemaOverNATS connects with opts and asks schema.get.
func schemaOverNATS(url string, opts ...nats.Option) error {
	nc, err := nats.Connect(url, append(opts, nats.Timeout(5*time.Second))...)
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = nc.Request(natstransport.Subject(natstransport.DefaultPrefix, natstransport.SubjectSchemaGet), nil, 10*time.Second)
	return err
}

func TestTLSOnEveryListener(t *testing.T) {
	ts := startTLSServer(t, server.Config{NoSync: true}, false)
	cfg := ts.ca.ClientConfig(t)
	if err := schemaOverGRPC(ts.C); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	hc := httpsClient(t, cfg)
	for _, url := range []string{"https://" + ts.Srv.HTTPAddr() + "/v1/schema", "https://" + ts.Srv.MetricsAddr() + "/metrics"} {
		code, proto, err := get(hc, url)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s over TLS: %d %v", url, code, err)
		}
		if strings.Contains(url, "/v1/") && proto != 2 {
			t.Errorf("REST over TLS negotiated HTTP/%d, want 2", proto)
		}
	}
	if err := schemaOverNATS(ts.Srv.NATSURL(), nats.Secure(cfg)); err != nil {
		t.Fatalf("NATS over TLS: %v", err)
	}

	// Plaintext to each TLS listener fails, promptly and with a clear error.
	plain, err := client.Dial(ts.Srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := schemaOverGRPC(plain); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext gRPC to a TLS listener: %v, want UNAVAILABLE", err)
	}
	for _, url := range []string{"http://" + ts.Srv.HTTPAddr() + "/v1/schema", "http://" + ts.Srv.MetricsAddr() + "/metrics"} {
		if code, _, err := get(&http.Client{Timeout: 10 * time.Second}, url); err != nil || code != http.StatusBadRequest {
			t.Errorf("plaintext GET %s: %d %v, want 400 (HTTP request to an HTTPS server)", url, code, err)
		}
	}
	// A NATS client that does not ask for TLS is told to use it by the
	// server's INFO, and then fails on the certificate it cannot verify.
	plainURL := "nats://" + strings.TrimPrefix(ts.Srv.NATSURL(), "tls://")
	if err := schemaOverNATS(plainURL); err == nil || !strings.Contains(err.Error(), "tls") {
		t.Errorf("plaintext NATS to a TLS server: %v, want a TLS error", err)
	}
	if !strings.HasPrefix(ts.Srv.NATSURL(), "tls://") {
		t.Errorf("NATSURL %q, want a tls:// URL", ts.Srv.NATSURL())
	}
	// A client that does not trust the server's CA refuses it.
	other := certstest.NewCA(t, "other")
	if err := schemaOverNATS(ts.Srv.NATSURL(), nats.Secure(other.ClientConfig(t))); err == nil {
		t.Error("NATS client trusting another CA connected")
	}
	if _, _, err := get(httpsClient(t, other.ClientConfig(t)), "https://"+ts.Srv.HTTPAddr()+"/v1/schema"); err == nil {
		t.Error("HTTPS client trusting another CA connected")
	}
}

func TestMutualTLSOnEveryListener(t *testing.T) {
	ts := startTLSServer(t, server.Config{NoSync: true}, true)
	withCert := ts.ca.ClientConfig(t, ts.ca.Client(t, "alice", "alice"))
	noCert := ts.ca.ClientConfig(t)
	rogueCA := certstest.NewCA(t, "rogue")
	rogueCert := ts.ca.ClientConfig(t, rogueCA.Client(t, "mallory", "mallory"))

	if err := schemaOverGRPC(ts.C); err != nil {
		t.Fatalf("gRPC with a client certificate: %v", err)
	}
	for _, cfg := range []*tls.Config{noCert, rogueCert} {
		c, err := client.Dial(ts.Srv.Addr(), client.WithTLS(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemaOverGRPC(c); status.Code(err) != codes.Unavailable {
			t.Errorf("gRPC without a valid client certificate: %v, want UNAVAILABLE", err)
		}
		c.Close()
	}
	for _, url := range []string{"https://" + ts.Srv.HTTPAddr() + "/v1/schema", "https://" + ts.Srv.MetricsAddr() + "/metrics"} {
		if code, _, err := get(httpsClient(t, withCert), url); err != nil || code != http.StatusOK {
			t.Fatalf("GET %s with a client certificate: %d %v", url, code, err)
		}
		for _, cfg := range []*tls.Config{noCert, rogueCert} {
			if _, _, err := get(httpsClient(t, cfg), url); err == nil {
				t.Errorf("GET %s without a valid client certificate succeeded", url)
			}
		}
	}
	if err := schemaOverNATS(ts.Srv.NATSURL(), nats.Secure(withCert)); err != nil {
		t.Fatalf("NATS with a client certificate: %v", err)
	}
	for _, cfg := range []*tls.Config{noCert, rogueCert} {
		if err := schemaOverNATS(ts.Srv.NATSURL(), nats.Secure(cfg)); err == nil {
			t.Error("NATS without a valid client certificate connected")
		}
	}
}

// servedSerial handshakes with addr and returns the serial of the
// certificate the server presented.
func servedSerial(t *testing.T, addr string, cfg *tls.Config) *big.Int {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatalf("handshake with %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// A new certificate is served to new handshakes after ReloadTLS (SIGHUP)
// and after its files change, while a stream opened before keeps working.
func TestTLSReloadKeepsOpenStreams(t *testing.T) {
	ts := startTLSServer(t, server.Config{NoSync: true, TLSReloadInterval: 10 * time.Millisecond}, false)
	cfg := ts.ca.ClientConfig(t)
	if got := servedSerial(t, ts.Srv.Addr(), cfg); got.Cmp(ts.cert.Serial) != 0 {
		t.Fatalf("served serial %v, want %v", got, ts.cert.Serial)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := ts.C.API().Search(ctx)
	if err != nil {
		t.Fatal(err)
	}
	search := func(id uint64) {
		t.Helper()
		if err := stream.Send(&pb.SearchRequest{Queries: []*pb.Query{{Type: "shop.User"}}}); err != nil {
			t.Fatalf("search on the stream opened before the reload: %v", err)
		}
		for {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatalf("search on the stream opened before the reload: %v", err)
			}
			for _, d := range resp.Done {
				if d.Query == id {
					return
				}
			}
		}
	}
	search(0)

	// Reload on demand (what SIGHUP does).
	next := ts.ca.Server(t, "next")
	certstest.Install(t, next, ts.cert)
	if err := ts.Srv.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{ts.Srv.Addr(), ts.Srv.HTTPAddr(), ts.Srv.MetricsAddr()} {
		if got := servedSerial(t, addr, cfg); got.Cmp(next.Serial) != 0 {
			t.Fatalf("%s serves serial %v after the reload, want %v", addr, got, next.Serial)
		}
	}
	if err := schemaOverNATS(ts.Srv.NATSURL(), nats.Secure(cfg)); err != nil {
		t.Fatalf("NATS after the reload: %v", err)
	}
	search(1)

	// Reload on a change of the files, seen by the watcher.
	third := ts.ca.Server(t, "third")
	certstest.Install(t, third, ts.cert)
	deadline := time.Now().Add(10 * time.Second)
	for servedSerial(t, ts.Srv.Addr(), cfg).Cmp(third.Serial) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the changed certificate files were not picked up within 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling for the watcher's outcome
	}
	search(2)
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

// The connection to an external NATS server goes over mutual TLS with
// NATSTLSCAFile and the client certificate, and fails without either.
func TestExternalNATSOverTLS(t *testing.T) {
	ca := certstest.NewCA(t, "nats")
	cert := ca.Server(t, "nats")
	r, err := certs.NewReloader(certs.Files{Cert: cert.CertFile, Key: cert.KeyFile, ClientCA: ca.File}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := natstransport.RunEmbedded(natstransport.EmbedOptions{Addr: "127.0.0.1:0", MaxPayload: 1 << 20, TLS: r.ServerConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	url := ns.ClientURL()
	if !strings.HasPrefix(url, "tls://") {
		t.Fatalf("external NATS URL %q is not tls://", url)
	}
	_, err = server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", NATSURL: url})
	if err == nil || !strings.Contains(err.Error(), "tls") {
		t.Fatalf("start without the NATS server's CA: %v, want a TLS error", err)
	}
	_, err = server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", NATSURL: url, NATSTLSCAFile: ca.File})
	if err == nil {
		t.Fatal("started without the client certificate the NATS server requires")
	}
	svc := ca.Client(t, "service", "protobase")
	ts := startServer(t, server.Config{NoSync: true, NATSURL: url, NATSTLSCAFile: ca.File, NATSTLSCertFile: svc.CertFile, NATSTLSKeyFile: svc.KeyFile})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	if err := schemaOverNATS(url, nats.Secure(ca.ClientConfig(t, ca.Client(t, "caller", "caller")))); err != nil {
		t.Fatalf("request through the external NATS server over TLS: %v", err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	cert := ca.Server(t, "server")
	for name, tc := range map[string]struct {
		cfg  server.Config
		want string
	}{
		"client CA alone":   {server.Config{TLSClientCAFile: ca.File}, "TLSClientCAFile requires client certificates over TLS"},
		"cert without key":  {server.Config{TLSCertFile: cert.CertFile}, "go together"},
		"key is not a cert": {server.Config{TLSCertFile: cert.KeyFile, TLSKeyFile: cert.KeyFile}, "tls: load"},
		"client CA not PEM": {server.Config{TLSCertFile: cert.CertFile, TLSKeyFile: cert.KeyFile, TLSClientCAFile: cert.KeyFile}, "no PEM certificate"},
	} {
		tc.cfg.DataDir, tc.cfg.GRPCAddr = t.TempDir(), "127.0.0.1:0"
		srv, err := server.Start(context.Background(), tc.cfg)
		if err == nil {
			_ = srv.Stop()
			t.Errorf("%s: started", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// A certificate that expired yesterday, installed over the served one, is
// refused by the file watcher and by ReloadTLS (SIGHUP): every listener
// keeps serving the previous certificate, the refusal is logged once at
// warn, and the metrics show it.
func TestTLSReloadRefusesExpiredCertificate(t *testing.T) {
	logs := &logRecorder{}
	ts := startTLSServer(t, server.Config{NoSync: true, TLSReloadInterval: 10 * time.Millisecond, Logger: slog.New(logs)}, false)
	cfg := ts.ca.ClientConfig(t)
	served := ts.cert.TLS(t).Leaf

	now := time.Now()
	expired := ts.ca.ServerWith(t, "expired", certstest.ServerOptions{NotBefore: now.Add(-30 * 24 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	certstest.Install(t, expired, ts.cert)
	const warn = "TLS certificate not reloaded; keeping the previous certificate"
	deadline := time.Now().Add(10 * time.Second)
	for logs.count(warn) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no warning within 10s of installing an expired certificate; logged %q", logs.all())
		}
		time.Sleep(10 * time.Millisecond) // polling for the watcher's outcome
	}
	checkServes := func(when string) {
		t.Helper()
		for _, addr := range []string{ts.Srv.Addr(), ts.Srv.HTTPAddr(), ts.Srv.MetricsAddr()} {
			if got := servedSerial(t, addr, cfg); got.Cmp(ts.cert.Serial) != 0 {
				t.Fatalf("%s: %s serves serial %v, want the previous %v", when, addr, got, ts.cert.Serial)
			}
		}
		c, err := client.Dial(ts.Srv.Addr(), client.WithTLS(cfg))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := schemaOverGRPC(c); err != nil {
			t.Fatalf("%s: a new gRPC connection: %v", when, err)
		}
		if err := schemaOverNATS(ts.Srv.NATSURL(), nats.Secure(cfg)); err != nil {
			t.Fatalf("%s: a new NATS connection: %v", when, err)
		}
	}
	checkServes("after the watcher saw the expired certificate")

	err := ts.Srv.ReloadTLS()
	if err == nil || !strings.Contains(err.Error(), "expired at") {
		t.Fatalf("ReloadTLS with an expired certificate: %v, want an error saying it expired", err)
	}
	other := ts.ca.ServerWith(t, "other", certstest.ServerOptions{DNSNames: []string{"db.example"}})
	certstest.Install(t, other, ts.cert)
	if err := ts.Srv.ReloadTLS(); err == nil || !strings.Contains(err.Error(), "does not cover localhost") {
		t.Fatalf("ReloadTLS with a certificate for other names: %v, want an error naming localhost", err)
	}
	checkServes("after ReloadTLS")

	fams := scrapeTLS(t, "https://"+ts.Srv.MetricsAddr()+"/metrics", cfg)
	if v, ok := metricValue(fams, "protobase_tls_reloads_refused_total", nil); !ok || v < 2 {
		t.Errorf("protobase_tls_reloads_refused_total = %v (%v), want at least 2", v, ok)
	}
	if v, ok := metricValue(fams, "protobase_tls_certificate_expiry_seconds", nil); !ok || int64(v) != served.NotAfter.Unix() {
		t.Errorf("protobase_tls_certificate_expiry_seconds = %v (%v), want %d", v, ok, served.NotAfter.Unix())
	}
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"protobase_tls_reloads_refused_total", "protobase_tls_certificate_expiry_seconds"} {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/operations.md does not list %s", name)
		}
	}
}

// scrapeTLS reads /metrics over TLS with cfg.
func scrapeTLS(t *testing.T, url string, cfg *tls.Config) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := httpsClient(t, cfg).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}
