package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/server"
)

// securityOptions are serve's transport-security flags.
type securityOptions struct {
	tlsCert, tlsKey, tlsClientCA string
	httpAllowedOrigins           []string
	httpAllowedHosts             []string
	natsTLSCA                    string
	natsTLSCert, natsTLSKey      string
}

func (o *securityOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate (chain): serve gRPC, REST, metrics and embedded NATS over TLS only; reloaded on SIGHUP and when the file changes")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&o.tlsClientCA, "tls-client-ca", "", "PEM CA certificates: require client certificates issued by them on every listener (mutual TLS; needs --tls-cert)")
	f.StringSliceVar(&o.httpAllowedOrigins, "http-allowed-origins", nil, "browser origins (scheme://host[:port], comma-separated) the REST gateway serves, CORS included; others get 403 (default none)")
	f.StringSliceVar(&o.httpAllowedHosts, "http-allowed-hosts", nil, "host names the REST gateway answers to besides IP addresses and localhost (DNS-rebinding protection), comma-separated")
	f.StringVar(&o.natsTLSCA, "nats-tls-ca", "", "PEM CA certificates verifying the external NATS server of --nats-url; turns TLS on for that connection")
	f.StringVar(&o.natsTLSCert, "nats-tls-cert", "", "PEM client certificate presented to the external NATS server of --nats-url (for verify: true)")
	f.StringVar(&o.natsTLSKey, "nats-tls-key", "", "PEM private key of --nats-tls-cert")
}

// apply copies the flags into cfg.
func (o *securityOptions) apply(cfg *server.Config) {
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = o.tlsCert, o.tlsKey, o.tlsClientCA
	cfg.HTTPAllowedOrigins, cfg.HTTPAllowedHosts = o.httpAllowedOrigins, o.httpAllowedHosts
	cfg.NATSTLSCAFile, cfg.NATSTLSCertFile, cfg.NATSTLSKeyFile = o.natsTLSCA, o.natsTLSCert, o.natsTLSKey
}

// reloadOnHangup makes SIGHUP reload the TLS files until ctx ends. It is
// registered before the server starts, so that a SIGHUP arriving early does
// not kill the process; without TLS it only logs that there is nothing to
// reload.
func reloadOnHangup(ctx context.Context, log *slog.Logger) func(*server.Server) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	srvc := make(chan *server.Server, 1)
	go func() {
		defer signal.Stop(hup)
		var srv *server.Server
		for {
			select {
			case <-ctx.Done():
				return
			case srv = <-srvc:
			case <-hup:
				switch {
				case srv == nil || !srv.TLS():
					log.Info("SIGHUP: no TLS certificate to reload")
				default:
					if err := srv.ReloadTLS(); err != nil {
						log.Warn("SIGHUP: TLS certificate not reloaded; keeping the previous certificate", "err", err)
					} else {
						log.Info("SIGHUP: TLS certificate reloaded")
					}
				}
			}
		}
	}()
	return func(srv *server.Server) { srvc <- srv }
}

// httpScheme is the scheme of srv's HTTP listeners.
func httpScheme(srv *server.Server) string {
	if srv.TLS() {
		return "https"
	}
	return "http"
}
