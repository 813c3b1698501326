package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/certs/certstest"
	"github.com/protobase/protobase/server"
)

// A plaintext client of a TLS server is told the server speaks TLS and
// to dial with WithTLS, on unary calls and streams alike; the status stays
// UNAVAILABLE.
func TestPlaintextToTLSServer(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	cert := ca.Server(t, "server")
	srv, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0",
		NoSync: true, TLSCertFile: cert.CertFile, TLSKeyFile: cert.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.GetSchema(t.Context())
	var te *client.TLSServerError
	if !errors.As(err, &te) || status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "speaks TLS") || !strings.Contains(err.Error(), "WithTLS") {
		t.Fatalf("GetSchema over plaintext to TLS: %v", err)
	}
	_, err = c.Get(t.Context(), "shop.User", 1)
	if !errors.As(err, &te) {
		t.Fatalf("Get over plaintext to TLS: %v", err)
	}
}
