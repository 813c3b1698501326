package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	natstransport "github.com/protobase/protobase/internal/transport/nats"
	"github.com/protobase/protobase/server"
)

// checkTransportFlags validates the REST and NATS flags of serve: flags
// that would silently do nothing are usage errors.
func checkTransportFlags(cmd *cobra.Command, o serveOptions) error {
	changed := cmd.Flags().Changed
	switch {
	case o.nats && o.natsURL != "":
		return usagef("--nats (embedded server) and --nats-url (external server) are exclusive")
	case changed("nats-addr") && !o.nats:
		return usagef("--nats-addr is the embedded NATS server's address: it needs --nats")
	case (changed("nats-prefix") || changed("nats-queue")) && !o.nats && o.natsURL == "":
		return usagef("--nats-prefix and --nats-queue need --nats or --nats-url")
	case o.nats && o.natsAddr == "":
		return usagef("--nats-addr must not be empty")
	case changed("nats-url") && o.natsURL == "":
		return usagef("--nats-url must not be empty")
	case changed("http-addr") && o.httpAddr == "":
		return usagef("--http-addr must not be empty")
	}
	if err := natstransport.ValidPrefix(o.natsPrefix); err != nil {
		return usagef("--nats-prefix %q: want subject tokens separated by dots, without wildcards or spaces", o.natsPrefix)
	}
	if o.natsQueue == "" || strings.ContainsAny(o.natsQueue, " \t\r\n*>") {
		return usagef("--nats-queue %q: want a queue group name without wildcards or spaces", o.natsQueue)
	}
	return nil
}

// natsAddr is the embedded server's address, or "" when there is none
// (server.Config refuses an address without an embedded server).
func natsAddr(o serveOptions) string {
	if !o.nats {
		return ""
	}
	return o.natsAddr
}

// printTransports tells where REST and NATS listen, as serve prints the
// gRPC address.
func printTransports(w io.Writer, srv *server.Server, o serveOptions) {
	if h := srv.HTTPAddr(); h != "" {
		fmt.Fprintf(w, "REST/JSON on %s://%s (OpenAPI at /openapi.json)\n", httpScheme(srv), h)
	}
	if u := srv.NATSURL(); u != "" {
		fmt.Fprintf(w, "NATS on %s (subjects %s.*, queue group %s)\n", u, o.natsPrefix, o.natsQueue)
	}
}
