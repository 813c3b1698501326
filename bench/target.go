package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/protobase/protobase/client"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/server"
)

// TargetConfig configures the embedded server of a Target. With --addr the
// running server is used as it is, and Target.Sync says what it does.
type TargetConfig struct {
	// NoSync starts the embedded server with server.Config.NoSync.
	NoSync bool
	// HTTP also serves the REST/JSON gateway on a free loopback port, and
	// NATS the NATS API on an embedded NATS server on a free loopback port
	// (Target.HTTPAddr, Target.NATSURL). An --addr server's are not
	// discovered: experiments that need them take their addresses as flags.
	HTTP, NATS bool
	// Local starts an embedded server even with --addr, for an experiment
	// that needs one in its own process beside the one it measures.
	Local bool
	// ClientOptions are added to the connections to an --addr server
	// (TLS: --tls-ca); Env.Target sets them from Options.ClientOptions.
	ClientOptions []client.Option
	// Etcd runs the embedded server on this etcd cluster (Endpoints set),
	// under a fresh prefix below Etcd.Prefix, instead of on Pebble; NoSync
	// does not apply (etcd commits every batch to a quorum).
	Etcd server.EtcdConfig
	// EtcdSame runs the server on Etcd.Prefix itself rather than on a
	// fresh prefix below it: a second server on the store of another
	// target (Target.Etcd). Both drop the store when closed.
	EtcdSame bool
}

// Target is a server an experiment talks to, over loopback TCP: an
// embedded server in a fresh temporary directory, or the --addr server.
type Target struct {
	// Addr is the server's gRPC address.
	Addr string
	// Client is a client connected to it; API and Lab are its raw stubs.
	Client *client.Client
	API    pbgrpc.ProtobaseClient
	Lab    labv1.LabClient
	// Embedded is false for an --addr server.
	Embedded bool
	// Sync reports whether the server fsyncs writes before acknowledging.
	Sync bool
	// Server is the embedded server (nil with --addr): the transports
	// experiment's no-hop modes call it in-process. Counters come from
	// Stats.
	Server *server.Server
	// HTTPAddr and NATSURL are where the embedded server serves REST and
	// NATS when TargetConfig asked for them, else "". NATSPrefix is the
	// first token of its NATS subjects.
	HTTPAddr, NATSURL, NATSPrefix string

	// Store names the embedded server's storage backend, "pebble" or
	// "etcd" ("" with --addr); Etcd is its etcd store (nil on Pebble),
	// which Close drops.
	Store string
	Etcd  *server.EtcdConfig

	dir           string          // the embedded server's data directory, removed on Close
	clientOptions []client.Option // Options.ClientOptions, for an --addr server
}

// LabNATSPrefix is the subject prefix of the embedded servers' NATS API.
const LabNATSPrefix = "protobase"

// DialOptions give the lab's connections windows large enough that a
// send-all-then-receive-all round never stalls on flow control.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(64 << 20),
		grpc.WithInitialConnWindowSize(64 << 20),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)),
	}
}

// Target starts an embedded lab server configured by cfg, or connects to
// the --addr server (which must serve the lab API: protobase serve --lab),
// with StartTarget. The Env closes it.
func (e *Env) Target(ctx context.Context, cfg TargetConfig) (*Target, error) {
	cfg.ClientOptions = e.ClientOptions
	t, err := StartTarget(ctx, e.Addr, cfg)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.targets = append(e.targets, t)
	e.mu.Unlock()
	return t, nil
}

// Targets returns the targets the Env started, in order, so that a test
// can read their servers' counters after an experiment ran.
func (e *Env) Targets() []*Target {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.targets)
}

// StartTarget is the one way the lab and its tests get a server: with addr
// "" (or cfg.Local) it starts an embedded lab server configured by cfg on
// a free loopback port in a fresh temporary directory; otherwise it
// connects to the server at addr, which must serve the lab API (protobase
// serve --lab). Either way it checks the lab API answers. The caller
// closes the Target.
func StartTarget(ctx context.Context, addr string, cfg TargetConfig) (*Target, error) {
	t := &Target{Addr: addr}
	if cfg.Local {
		t.Addr = ""
	}
	if t.Addr == "" {
		if err := t.startEmbedded(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if !t.Embedded {
		t.clientOptions = cfg.ClientOptions
	}
	c, err := client.Dial(t.Addr, t.ClientOptions()...)
	if err != nil {
		_ = t.Close()
		return nil, fmt.Errorf("dial %s: %w", t.Addr, err)
	}
	t.Client, t.API, t.Lab = c, c.API(), labv1.NewLabClient(c.Conn())
	st, err := t.Lab.Stats(ctx, &labv1.StatsRequest{})
	if err != nil {
		_ = t.Close()
		return nil, fmt.Errorf("server at %s does not serve the lab API (start it with protobase serve --lab): %w", t.Addr, err)
	}
	t.Sync = st.Sync
	return t, nil
}

// startEmbedded starts t's embedded server.
func (t *Target) startEmbedded(ctx context.Context, cfg TargetConfig) error {
	dir, err := os.MkdirTemp("", "protobase-bench-*")
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	scfg := server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0", NoSync: cfg.NoSync, Lab: true}
	t.Store = server.StorePebble
	if len(cfg.Etcd.Endpoints) > 0 {
		e, err := cfg.Etcd, error(nil)
		if !cfg.EtcdSame {
			e, err = freshEtcdStore(cfg.Etcd)
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return err
		}
		scfg.Store, scfg.Etcd, scfg.NoSync = server.StoreEtcd, e, false
		t.Store, t.Etcd = server.StoreEtcd, &e
	}
	if cfg.HTTP {
		scfg.HTTPAddr = "127.0.0.1:0"
	}
	if cfg.NATS {
		scfg.NATS, scfg.NATSAddr, scfg.NATSPrefix = true, "127.0.0.1:0", LabNATSPrefix
	}
	srv, err := server.Start(ctx, scfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("start embedded %s server: %w", t.Store, err)
	}
	t.Addr, t.Embedded, t.Server, t.dir = srv.Addr(), true, srv, dir
	t.HTTPAddr, t.NATSURL = srv.HTTPAddr(), srv.NATSURL()
	if cfg.NATS {
		t.NATSPrefix = LabNATSPrefix
	}
	return nil
}

// Stats returns the server's engine counters.
func (t *Target) Stats(ctx context.Context) (*labv1.StatsResponse, error) {
	st, err := t.Lab.Stats(ctx, &labv1.StatsRequest{})
	if err != nil {
		return nil, fmt.Errorf("lab stats: %w", err)
	}
	return st, nil
}

// EnsureSchema adds files to the server's schema in one additive apply,
// keeping every other file there (an --addr server may hold other types,
// and other clients may apply theirs meanwhile); files already current
// change nothing.
func (t *Target) EnsureSchema(ctx context.Context, files map[string]string) error {
	if _, err := t.Client.ApplySchema(ctx, files, client.SchemaOptions{Add: true}); err != nil {
		return fmt.Errorf("apply lab schema: %w", err)
	}
	return nil
}

// Close closes the client and stops and removes an embedded server.
func (t *Target) Close() error {
	var errs []error
	if t.Client != nil {
		errs = append(errs, t.Client.Close())
	}
	if t.Server != nil {
		errs = append(errs, t.Server.Stop())
	}
	if t.dir != "" {
		errs = append(errs, os.RemoveAll(t.dir))
	}
	if t.Etcd != nil {
		// Deleting what a long ingest run wrote takes etcd a while: some
		// thousands of keys per transaction, each fsynced by a quorum.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		errs = append(errs, server.DropEtcd(ctx, *t.Etcd))
		cancel()
	}
	return errors.Join(errs...)
}

// freshEtcdStore is e with a new random prefix below its own (or
// EtcdBenchPrefix), so that every embedded server starts on an empty store.
func freshEtcdStore(e server.EtcdConfig) (server.EtcdConfig, error) {
	base := e.Prefix
	if base == "" {
		base = EtcdBenchPrefix
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return e, fmt.Errorf("etcd store prefix: %w", err)
	}
	e.Endpoints = slices.Clone(e.Endpoints)
	e.Prefix = base + hex.EncodeToString(id[:]) + "/"
	return e, nil
}

// ClientOptions are the client options of a connection to t: the lab's
// dial options plus extra, and TLS for an --addr server.
func (t *Target) ClientOptions(extra ...grpc.DialOption) []client.Option {
	return append([]client.Option{client.WithDialOptions(append(DialOptions(), extra...)...)}, t.clientOptions...)
}
