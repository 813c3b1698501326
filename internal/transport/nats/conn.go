package nats

import (
	"log/slog"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/protobase/protobase/internal/lograte"
)

// ConnOptions are the nats.go options of the service's own connection, on
// the embedded server or an external one: it reconnects for as long as the
// service runs (its subscriptions, and so the queue group, are restored by
// nats.go), and its losses and recoveries are counted in stats and logged
// at WARN, at most once per 10 s each. Errors NATS reports on the
// service's subscriptions are the service's to report (see Options.Stats);
// the others are logged here, spaced alike, instead of being printed on
// standard error as nats.go does by default.
func ConnOptions(log *slog.Logger, stats *Stats) []nats.Option {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lost, back, other := new(lograte.Limiter), new(lograte.Limiter), new(lograte.Limiter)
	return []nats.Option{
		nats.Name(ServiceName),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() { // closed by the server's own Stop
				return
			}
			stats.disconnects.Add(1)
			if n, ok := lost.Allow(); ok {
				log.Warn("nats: the service's connection to NATS was lost; reconnecting", "err", err, "times", n)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			stats.reconnects.Add(1)
			if n, ok := back.Allow(); ok {
				log.Warn("nats: the service's connection to NATS is back", "times", n)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				return
			}
			if n, ok := other.Allow(); ok {
				log.Warn("nats: the service's connection reported an error", "err", err, "times", n)
			}
		}),
	}
}

// inProcessReconnectWait is how long the in-process connection waits
// between attempts to reconnect: the embedded server is in the same
// process, so an attempt is cheap and either works at once or (while the
// server shuts down) fails at once.
const inProcessReconnectWait = 100 * time.Millisecond

// InProcess are the nats.go options that connect the service to the
// embedded server ns in-process (no TCP, and so no TLS, on its path). If ns
// closes the connection (a slow consumer: see EmbedOptions.MaxPending) it
// is made again, nats.go waiting inProcessReconnectWait between attempts.
func InProcess(ns *natsserver.Server) []nats.Option {
	return []nats.Option{nats.InProcessServer(ns), nats.ReconnectWait(inProcessReconnectWait)}
}
