package client

import (
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/protobase/protobase/internal/certs"
)

// WithTLS connects over TLS configured by cfg (a nil cfg trusts the
// system's roots). Without it, or WithDialOptions credentials, the
// connection is plaintext, which a server started with TLS refuses.
func WithTLS(cfg *tls.Config) Option {
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return func(o *dialOptions) {
		o.grpc = append(o.grpc, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
}

// TLSConfig builds a config for WithTLS that trusts the CA certificates
// of the PEM file caFile (the system's roots when it is ""), and presents
// the client certificate of certFile and keyFile when both are set (for a
// server that requires client certificates).
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	return certs.ClientConfig(caFile, certFile, keyFile)
}
