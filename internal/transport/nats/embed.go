package nats

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// MaxEmbeddedPayload caps max_payload of the embedded NATS server. NATS
// holds a message whole in every buffer on its way and advises staying at
// or below 8 MiB; batches larger than that belong on the gRPC or REST write
// streams, which have no such ceiling.
const MaxEmbeddedPayload = 8 << 20

// RunEmbedded starts a NATS server in this process listening on addr
// (host:port; port 0 picks a free port) with max_payload set to
// min(maxPayload, MaxEmbeddedPayload), and waits until it accepts clients.
// The caller shuts it down with Shutdown and WaitForShutdown.
func RunEmbedded(addr string, maxPayload int) (*natsserver.Server, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("nats address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("nats address %q: bad port", addr)
	}
	if port == 0 {
		// NATS reads port 0 as its default 4222; -1 asks for a free one.
		port = natsserver.RANDOM_PORT
	} else {
		// A NATS server that cannot listen only logs it (and we run it
		// without a logger, since its logger exits the process on fatal
		// errors): try the address first for a clear, immediate error.
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: %w", err)
		}
		_ = l.Close()
	}
	if maxPayload <= 0 || maxPayload > MaxEmbeddedPayload {
		maxPayload = MaxEmbeddedPayload
	}
	ns, err := natsserver.NewServer(&natsserver.Options{
		ServerName: "protobase",
		Host:       host,
		Port:       port,
		MaxPayload: int32(maxPayload),
		NoSigs:     true, // the embedding process owns signals
		NoLog:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("embedded nats: not ready to accept clients after 10s (is the address in use?)")
	}
	return ns, nil
}
