package nats

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
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

// DefaultMaxPending is the embedded server's max_pending: the bytes it
// queues for one client connection, not yet written to it, before it
// closes the connection as a slow consumer. nats-server has one value for
// every client; it matters most for the service's own connection, on
// which every caller's requests converge: what callers publish faster
// than the service reads queues there. Four connections publishing 8 MiB
// requests as fast as they could, on the same 2-core machine, had NATS
// close the service's connection within a second at nats-server's default
// of 64 MiB, and peaked at 151 to 335 MiB queued for it with max_pending
// between 256 MiB and 1 GiB (docs/limits.md). A caller's connection only
// holds its own replies.
const DefaultMaxPending = 512 << 20

// EmbedOptions configure RunEmbedded.
type EmbedOptions struct {
	// Addr is the listen address, host:port (port 0 picks a free port).
	Addr string
	// MaxPayload sets max_payload to min(MaxPayload, MaxEmbeddedPayload).
	MaxPayload int
	// MaxPending sets max_pending (default DefaultMaxPending).
	MaxPending int64
	// TLS, when set, makes clients connect over TLS only (in-process
	// connections excepted); a config that requires client certificates
	// makes it mutual TLS.
	TLS *tls.Config
	// Auth, when set, authenticates every client (see Auth).
	Auth natsserver.Authentication
	// HandshakeTimeout bounds a new client's TLS handshake and, after
	// it, the wait for its CONNECT (0: NATS's defaults).
	HandshakeTimeout time.Duration
	// MaxConns caps the clients connected over the network at once (0:
	// NATS's default, 65,536; negative: no cap); past it a new client
	// gets "-ERR 'maximum connections exceeded'" and is closed.
	MaxConns int
}

// RunEmbedded starts a NATS server in this process and waits until it
// accepts clients. The caller shuts it down with Shutdown and
// WaitForShutdown.
func RunEmbedded(o EmbedOptions) (*natsserver.Server, error) {
	addr, maxPayload := o.Addr, o.MaxPayload
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
	maxPending := o.MaxPending
	if maxPending <= 0 {
		maxPending = DefaultMaxPending
	}
	nopts := &natsserver.Options{
		ServerName:                 "protobase",
		Host:                       host,
		Port:                       port,
		MaxPayload:                 int32(maxPayload),
		MaxPending:                 max(maxPending, int64(maxPayload)),
		NoSigs:                     true, // the embedding process owns signals
		NoLog:                      true,
		CustomClientAuthentication: o.Auth,
	}

	if o.TLS != nil {
		nopts.TLS, nopts.TLSConfig = true, o.TLS
		nopts.TLSVerify = o.TLS.ClientAuth >= tls.RequireAnyClientCert
	}
	connectionOptions(nopts, o)
	ns, err := natsserver.NewServer(nopts)
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

// connectionOptions sets what a client may hold by connecting: the time
// to its CONNECT and the number of clients.
func connectionOptions(nopts *natsserver.Options, o EmbedOptions) {
	if o.HandshakeTimeout > 0 {
		nopts.TLSTimeout = o.HandshakeTimeout.Seconds()
		nopts.AuthTimeout = o.HandshakeTimeout.Seconds()
	}
	switch {
	case o.MaxConns > 0:
		// NATS counts the in-process connection of the service too.
		nopts.MaxConn = o.MaxConns + 1
	case o.MaxConns < 0:
		nopts.MaxConn = math.MaxInt32 // a negative MaxConn refuses every client
	}
}
