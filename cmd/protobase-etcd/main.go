// Command protobase-etcd runs one etcd member, the real etcd server (v3.7)
// built from its Go module, so that a local cluster for Protobase needs no
// etcd installed: the cluster harness (internal/cluster), `make cluster` and
// the tests build this program with `go build` and start three of it.
//
// It is a development and test tool, kept apart from cmd/protobase so that
// the etcd server does not enlarge the protobase binary. Production
// clusters run etcd's own release binaries; the flags here use etcd's names
// so that a command line carries over.
//
// The member listens for clients and peers on the given URLs (it advertises
// the same ones), prints "READY <client URL>" to stdout once it has joined
// its cluster and serves, and runs until SIGINT or SIGTERM, after which it
// exits within a few seconds (closeTimeout) whatever the cluster's state.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"
)

// Exit codes: 0 after a signal, 1 when the member fails, 2 for a wrong
// command line.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// readyTimeout bounds how long a member waits to join its cluster (a member
// of a new three-member cluster is ready only once a quorum has started).
const readyTimeout = 2 * time.Minute

// closeTimeout bounds the member's close after a signal. etcd's close
// waits for its clients' streams (a watch holds one open) up to its request
// timeout, 7 s with the default election timeout, and a leader hands its
// leadership over first: without a quorum, or with Protobase servers still
// watching, a SIGTERM took longer than a supervisor waits. Exiting before
// the close ends loses nothing: etcd's write-ahead log holds every entry
// it acknowledged, as after a kill.
const closeTimeout = 3 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitUsage
	}
	if err := serve(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// serve starts the member, reports it ready and blocks until ctx ends or
// the member fails; it closes the member within closeTimeout.
func serve(ctx context.Context, cfg *embed.Config, stdout, stderr io.Writer) error {
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start member %s: %w", cfg.Name, err)
	}
	defer closeMember(e, cfg.Name, stderr)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("member %s: %w", cfg.Name, err)
	case <-time.After(readyTimeout):
		return fmt.Errorf("member %s: not ready after %s (are a quorum of the initial cluster's members started?)", cfg.Name, readyTimeout)
	case <-ctx.Done():
		return nil
	}
	fmt.Fprintf(stdout, "READY %s\n", cfg.AdvertiseClientUrls[0].String())
	select {
	case err := <-e.Err():
		return fmt.Errorf("member %s: %w", cfg.Name, err)
	case <-ctx.Done():
		return nil
	}
}

// closeMember closes e, or gives up after closeTimeout and returns with
// the close still running (the process then exits).
func closeMember(e *embed.Etcd, name string, stderr io.Writer) {
	closed := make(chan struct{})
	go func() {
		e.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(closeTimeout):
		fmt.Fprintf(stderr, "member %s: not closed within %s (clients still connected, or no quorum to hand leadership to); "+
			"exiting anyway: the log holds every acknowledged entry\n", name, closeTimeout)
	}
}

// parseFlags builds the member's configuration from the command line and
// checks it the way etcd would, so that a bad flag is a usage error here
// rather than a failure deep in the server's start.
func parseFlags(args []string, stderr io.Writer) (*embed.Config, error) {
	cfg := embed.NewConfig()
	fs := flag.NewFlagSet("protobase-etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: protobase-etcd --name NAME --data-dir DIR --listen-client-urls URL --listen-peer-urls URL --initial-cluster NAME=PEERURL,...

Runs one etcd member for a local Protobase cluster (development and tests;
production clusters run etcd's release binaries). Prints "READY <client URL>"
once it serves; stops on SIGINT or SIGTERM, within 3 s.

`)
		fs.PrintDefaults()
	}
	var clientURL, peerURL string
	fs.StringVar(&cfg.Name, "name", "", "member name, unique in the cluster (required)")
	fs.StringVar(&cfg.Dir, "data-dir", "", "data directory (required; created if missing)")
	fs.StringVar(&clientURL, "listen-client-urls", "", "client URL, e.g. http://127.0.0.1:2379 (required; also advertised)")
	fs.StringVar(&peerURL, "listen-peer-urls", "", "peer URL, e.g. http://127.0.0.1:2380 (required; also advertised)")
	fs.StringVar(&cfg.InitialCluster, "initial-cluster", "", "every initial member, NAME=PEERURL,... (required)")
	fs.StringVar(&cfg.ClusterState, "initial-cluster-state", embed.ClusterStateFlagNew, "new or existing")
	fs.StringVar(&cfg.InitialClusterToken, "initial-cluster-token", "protobase-local", "token that keeps separate clusters apart")
	fs.Int64Var(&cfg.QuotaBackendBytes, "quota-backend-bytes", 0, "backend size at which the member stops taking writes (0: etcd's 2 GiB)")
	fs.UintVar(&cfg.MaxTxnOps, "max-txn-ops", cfg.MaxTxnOps, "most operations in one transaction")
	fs.UintVar(&cfg.MaxRequestBytes, "max-request-bytes", cfg.MaxRequestBytes, "largest client request, in bytes")
	fs.UintVar(&cfg.TickMs, "heartbeat-interval", cfg.TickMs, "Raft heartbeat interval, in ms")
	fs.UintVar(&cfg.ElectionMs, "election-timeout", cfg.ElectionMs, "Raft election timeout, in ms")
	fs.StringVar(&cfg.LogLevel, "log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (every setting is a flag)", fs.Arg(0))
	}
	for _, req := range []struct{ name, v string }{
		{"--name", cfg.Name}, {"--data-dir", cfg.Dir}, {"--listen-client-urls", clientURL},
		{"--listen-peer-urls", peerURL}, {"--initial-cluster", cfg.InitialCluster},
	} {
		if strings.TrimSpace(req.v) == "" {
			return nil, fmt.Errorf("%s is required", req.name)
		}
	}
	cu, err := memberURL("--listen-client-urls", clientURL)
	if err != nil {
		return nil, err
	}
	pu, err := memberURL("--listen-peer-urls", peerURL)
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	if err := checkInitialCluster(cfg.InitialCluster, cfg.Name, pu); err != nil {
		return nil, err
	}
	if cfg.QuotaBackendBytes < 0 {
		return nil, fmt.Errorf("--quota-backend-bytes %d: want 0 or more", cfg.QuotaBackendBytes)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("member configuration: %w", err)
	}
	return cfg, nil
}

// memberURL parses one http URL with a host and port and nothing else: the
// member serves plain HTTP on loopback for development, and a path, a user
// or a second URL would be silently ignored by etcd.
func memberURL(flagName, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flagName, s, err)
	}
	if u.Scheme != "http" || u.Host == "" || u.Port() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s %q: want one URL http://HOST:PORT", flagName, s)
	}
	return u, nil
}

// checkInitialCluster makes sure that the initial cluster names this member
// with its own peer URL, which etcd checks only once the server starts.
func checkInitialCluster(initial, name string, peer *url.URL) error {
	m, err := types.NewURLsMap(initial)
	if err != nil {
		return fmt.Errorf("--initial-cluster %q: %w", initial, err)
	}
	urls, ok := m[name]
	if !ok {
		return fmt.Errorf("--initial-cluster %q does not name --name %q", initial, name)
	}
	for _, u := range urls {
		if u.String() == peer.String() {
			return nil
		}
	}
	return fmt.Errorf("--initial-cluster gives %s the peer URLs %s, not --listen-peer-urls %s", name, urls, peer)
}
