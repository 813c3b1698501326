package main

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/client"
)

// clientTLS are the global flags that make the client commands and the
// lab connect over TLS.
type clientTLS struct {
	ca, cert, key string
}

func (c *clientTLS) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.ca, "tls-ca", os.Getenv("PROTOBASE_TLS_CA"),
		"connect over TLS, trusting the CA certificates of this PEM file ($PROTOBASE_TLS_CA)")
	f.StringVar(&c.cert, "tls-client-cert", os.Getenv("PROTOBASE_TLS_CLIENT_CERT"),
		"with --tls-ca: present this PEM client certificate, for a server started with --tls-client-ca ($PROTOBASE_TLS_CLIENT_CERT)")
	f.StringVar(&c.key, "tls-client-key", os.Getenv("PROTOBASE_TLS_CLIENT_KEY"),
		"the PEM private key of --tls-client-cert ($PROTOBASE_TLS_CLIENT_KEY)")
}

// options are the client options the flags ask for: none without --tls-ca.
func (c *clientTLS) options() ([]client.Option, error) {
	cfg, err := c.config()
	if cfg == nil || err != nil {
		return nil, err
	}
	return []client.Option{client.WithTLS(cfg)}, nil
}

// config is the TLS client configuration the flags ask for: nil without
// --tls-ca.
func (c *clientTLS) config() (*tls.Config, error) {
	if c.ca == "" {
		if c.cert != "" || c.key != "" {
			return nil, usagef("--tls-client-cert and --tls-client-key need --tls-ca")
		}
		return nil, nil
	}
	cfg, err := client.TLSConfig(c.ca, c.cert, c.key)
	if err != nil {
		return nil, usageError(fmt.Errorf("--tls-ca: %w", err))
	}
	return cfg, nil
}
