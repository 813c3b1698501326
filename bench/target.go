package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"

	"google.golang.org/grpc"

	"github.com/protobase/protobase/client"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
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
}

// Target is a server an experiment talks to, over loopback TCP: an
// embedded server in a fresh temporary directory, or the --addr server.
type Target struct {
	// Addr is the server's gRPC address.
	Addr string
	// Client is a client connected to it; API and Lab are its raw stubs.
	Client *client.Client
	API    pb.ProtobaseClient
	Lab    labv1.LabClient
	// Embedded is false for an --addr server.
	Embedded bool
	// Sync reports whether the server fsyncs writes before acknowledging.
	Sync bool
	// Server is the embedded server (nil with --addr), so that tests can
	// read its engine's counters; experiments use Stats instead.
	Server *server.Server
	// HTTPAddr and NATSURL are where the embedded server serves REST and
	// NATS when TargetConfig asked for them, else "". NATSPrefix is the
	// first token of its NATS subjects.
	HTTPAddr, NATSURL, NATSPrefix string

	dir           string          // the embedded server's data directory, removed on Close
	clientOptions []client.Option // Options.ClientOptions, for an --addr server
}

// labNATSPrefix is the subject prefix of the embedded servers' NATS API.
const labNATSPrefix = "protobase"

// dialOptions give the lab's connections windows large enough that a
// send-all-then-receive-all round never stalls on flow control.
func dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(64 << 20),
		grpc.WithInitialConnWindowSize(64 << 20),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)),
	}
}

// Target starts an embedded lab server configured by cfg, or connects to
// the --addr server (which must serve the lab API: protobase serve --lab).
// The Env closes it.
func (e *Env) Target(ctx context.Context, cfg TargetConfig) (*Target, error) {
	t := &Target{Addr: e.Addr, clientOptions: e.ClientOptions}
	if cfg.Local {
		t.Addr = ""
	}
	if t.Addr == "" {
		dir, err := os.MkdirTemp("", "protobase-bench-*")
		if err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		scfg := server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0", NoSync: cfg.NoSync, Lab: true}
		if cfg.HTTP {
			scfg.HTTPAddr = "127.0.0.1:0"
		}
		if cfg.NATS {
			scfg.NATS, scfg.NATSAddr, scfg.NATSPrefix = true, "127.0.0.1:0", labNATSPrefix
		}
		srv, err := server.Start(ctx, scfg)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("start embedded server: %w", err)
		}
		t.Addr, t.Embedded, t.Server, t.dir = srv.Addr(), true, srv, dir
		t.HTTPAddr, t.NATSURL = srv.HTTPAddr(), srv.NATSURL()
		if cfg.NATS {
			t.NATSPrefix = labNATSPrefix
		}
	}
	c, err := client.Dial(t.Addr, t.dialOptions()...)
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
	e.mu.Lock()
	e.targets = append(e.targets, t)
	e.mu.Unlock()
	return t, nil
}

// dialOptions are the client options of a connection to t, extra is
// added to the lab's dial options.
func (t *Target) dialOptions(extra ...grpc.DialOption) []client.Option {
	opts := []client.Option{client.WithDialOptions(append(dialOptions(), extra...)...)}
	if !t.Embedded {
		opts = append(opts, t.clientOptions...)
	}
	return opts
}

// Stats returns the server's engine counters.
func (t *Target) Stats(ctx context.Context) (*labv1.StatsResponse, error) {
	st, err := t.Lab.Stats(ctx, &labv1.StatsRequest{})
	if err != nil {
		return nil, fmt.Errorf("lab stats: %w", err)
	}
	return st, nil
}

// EnsureSchema adds files to the server's schema, keeping every file
// already there (ApplySchema is whole-state, and an --addr server may hold
// other types). It applies nothing when the files are already current.
func (t *Target) EnsureSchema(ctx context.Context, files map[string]string) error {
	cur, err := t.Client.GetSchema(ctx)
	if err != nil {
		return fmt.Errorf("get schema: %w", err)
	}
	all := maps.Clone(cur.Files)
	if all == nil {
		all = map[string]string{}
	}
	changed := false
	for name, src := range files {
		if all[name] != src {
			all[name], changed = src, true
		}
	}
	if !changed {
		return nil
	}
	if _, err := t.Client.ApplySchema(ctx, all, client.SchemaOptions{}); err != nil {
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
	return errors.Join(errs...)
}
