// Package clientflags owns the command-line flags by which a Protobase
// command names the server it talks to and how it reaches it: --addr,
// --api-key and the --tls-* flags, each with its environment variable.
// protobase and protobase-bench register the same set, so that a command
// line or an environment that reaches a server with one reaches it with the
// other.
package clientflags

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/client"
)

// DefaultAddr is the server address used when neither --addr nor
// $PROTOBASE_ADDR is given.
const DefaultAddr = "127.0.0.1:7070"

// Flags holds the values of the flags after parsing.
type Flags struct {
	// Addr is --addr, host:port.
	Addr string

	apiKey                 string
	tlsCA, tlsCert, tlsKey string
}

// Register adds the flags to fs. Environment variables are read now, as
// the defaults, except $PROTOBASE_API_KEY: Key reads it only when dialling,
// so that --help never prints a key as a default.
func (f *Flags) Register(fs *pflag.FlagSet) {
	addr := DefaultAddr
	if v := os.Getenv("PROTOBASE_ADDR"); v != "" {
		addr = v
	}
	fs.StringVar(&f.Addr, "addr", addr,
		"server address, host:port ($PROTOBASE_ADDR, when set, overrides the default)")
	fs.StringVar(&f.apiKey, "api-key", "",
		"API key for a server that requires one (default $PROTOBASE_API_KEY)")
	fs.StringVar(&f.tlsCA, "tls-ca", os.Getenv("PROTOBASE_TLS_CA"),
		"connect over TLS, trusting the CA certificates of this PEM file ($PROTOBASE_TLS_CA)")
	fs.StringVar(&f.tlsCert, "tls-client-cert", os.Getenv("PROTOBASE_TLS_CLIENT_CERT"),
		"with --tls-ca: present this PEM client certificate, for a server started with --tls-client-ca ($PROTOBASE_TLS_CLIENT_CERT)")
	fs.StringVar(&f.tlsKey, "tls-client-key", os.Getenv("PROTOBASE_TLS_CLIENT_KEY"),
		"the PEM private key of --tls-client-cert ($PROTOBASE_TLS_CLIENT_KEY)")
}

// Key returns the API key of --api-key, else of $PROTOBASE_API_KEY.
func (f *Flags) Key() string {
	if f.apiKey != "" {
		return f.apiKey
	}
	return os.Getenv("PROTOBASE_API_KEY")
}

// TLSConfig is the TLS client configuration the flags ask for: nil without
// --tls-ca. Its errors are mistakes in the command line and name the flag.
func (f *Flags) TLSConfig() (*tls.Config, error) {
	if f.tlsCA == "" {
		if f.tlsCert != "" || f.tlsKey != "" {
			return nil, errors.New("--tls-client-cert and --tls-client-key need --tls-ca")
		}
		return nil, nil
	}
	cfg, err := client.TLSConfig(f.tlsCA, f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	return cfg, nil
}

// Options are the client options the flags ask for: TLS with --tls-ca, the
// key of Key when there is one. Its errors are those of TLSConfig.
func (f *Flags) Options() ([]client.Option, error) {
	cfg, err := f.TLSConfig()
	if err != nil {
		return nil, err
	}
	var opts []client.Option
	if cfg != nil {
		opts = append(opts, client.WithTLS(cfg))
	}
	if key := f.Key(); key != "" {
		opts = append(opts, client.WithAPIKey(key))
	}
	return opts, nil
}
