package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/protobase/protobase/internal/connlimit"
	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/internal/memsize"
	"github.com/protobase/protobase/internal/recordcache"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

// serveOptions are the flags of serve.
type serveOptions struct {
	data             string
	grpcAddr         string
	metricsAddr      string
	httpAddr         string
	nats             bool
	natsAddr         string
	natsURL          string
	natsPrefix       string
	natsQueue        string
	natsKeyRate      int64
	sync             bool
	maxMessageBytes  int
	maxBatchRecords  int
	maxBatchConds    int
	maxCondReads     int
	maxInflightBytes int64
	cacheBytes       int64
	memTableBytes    int64
	recordCacheBytes int64
	goMemoryLimit    int64
	shutdownTimeout  time.Duration
	watchRetention   time.Duration
	watchRetBytes    int64
	watchTailBytes   int64
	logLevel         string
	logFormat        string
	slowQuery        time.Duration
	otlpEndpoint     string
	traceSampleRatio float64
	ttlReapInterval  time.Duration
	lab              bool
	auth             bool            // --auth
	insecureNoAuth   bool            // --insecure-no-auth
	security         securityOptions // TLS and REST/NATS hardening, serve_tls.go
	storage          storeOptions    // --store and the etcd flags, serve_store.go

	// bounds against hostile clients (docs/limits.md)
	maxStreamsPerConn    uint32
	maxResultBufferBytes int64
	maxSearchQueries     int
	maxAggregateGroups   int
	maxReceiveBytes      int64 // server-wide receive budget
	maxReceivePerConn    int64
	handshakeTimeout     time.Duration
	idleTimeout          time.Duration
	maxConnections       int
}

func (a *app) serveCommand() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Protobase server",
		Long:  serveLong,
		Example: `  protobase serve
  protobase serve --http-addr 127.0.0.1:8080 --nats             # REST and embedded NATS
  protobase serve --nats-url nats://nats.internal:4222 --nats-prefix shop
  protobase serve --data /var/lib/protobase --grpc-addr 0.0.0.0:7070 --metrics-addr :9090   # auth on
  protobase serve --auth                           # keys on loopback too
  protobase serve --grpc-addr 0.0.0.0:7070 --tls-cert server.pem --tls-key server-key.pem   # auth and TLS
  protobase serve --store etcd --etcd-endpoints 10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379
  protobase serve --sync=false --log-level debug   # benchmarks only
  protobase serve --lab                            # a target for protobase-bench --addr`,
		Args: cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.LocalFlags(), os.LookupEnv); err != nil {
				return exitstatus.UsageError(err)
			}
			return a.serve(cmd, o)
		}),
	}
	f := cmd.Flags()
	o.addFlags(f)
	o.security.addFlags(f)
	o.storage.addFlags(f)
	annotateEnv(f)
	return cmd
}

func (a *app) serve(cmd *cobra.Command, o serveOptions) error {
	level, err := parseLogLevel(o.logLevel)
	if err != nil {
		return exitstatus.UsageError(err)
	}
	if err := checkEmptyFlags(cmd); err != nil {
		return err
	}
	if err := checkOffFlags(o); err != nil {
		return err
	}
	cfg := serveConfig(cmd, o)
	o.security.apply(&cfg)
	o.storage.apply(&cfg)
	if err := cfg.Validate(); err != nil {
		return exitstatus.UsageError(configError(err))
	}
	log, err := newLogger(a.stderr, o.logFormat, level)
	if err != nil {
		return exitstatus.UsageError(err)
	}
	defer grpcLog.use(log)()
	out := newAnnouncer(a.stdout, o.logFormat)
	if err := a.runServer(cmd, o, cfg, log, out); err != nil {
		if !out.json {
			return err
		}
		// Every line is JSON: the failure too, on the log, and the exit
		// status without the text line Execute would print.
		log.Error("the server stopped", "err", err.Error())
		return &exitstatus.Error{Code: exitstatus.Failed}
	}
	return nil
}

// runServer starts the server, tells where it serves, and runs it until
// SIGINT or SIGTERM.
func (a *app) runServer(cmd *cobra.Command, o serveOptions, cfg server.Config, log *slog.Logger, out announcer) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serving := reloadOnHangup(ctx, log)
	cfg.Logger = log
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		if errors.Is(err, server.ErrLocked) {
			return fmt.Errorf("cannot start the server: %w\n(is another server using the data directory %s?)", err, o.data)
		}
		return fmt.Errorf("cannot start the server: %w", err)
	}
	out.line(fmt.Sprintf("protobase serving on %s (%s)", srv.Addr(), o.storage.where(o.data)),
		"protobase serving", "addr", srv.Addr(), "store", o.storage.where(o.data))
	if m := srv.MetricsAddr(); m != "" {
		url := fmt.Sprintf("%s://%s/metrics", httpScheme(srv), m)
		out.line("metrics on "+url, "metrics", "url", url)
	}
	serving(srv)
	printTransports(out, srv, o)
	if !o.sync {
		log.Warn("sync is off: a crash or power loss can lose acknowledged writes")
	}

	select {
	case <-ctx.Done():
		// A second signal kills the process the default way.
		stop()
		log.Info("shutting down; in-flight calls are finishing")
		if err := srv.Stop(); err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		return nil
	case <-srv.Done():
		err := srv.Stop()
		return errors.Join(errors.New("the gRPC server stopped unexpectedly"), err)
	}
}

func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
}

func newLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsInMillis}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// sizeString renders a byte size in MiB, or GiB from 1 GiB, for help texts.
func sizeString(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// serveLong is serve's --help text; it names every flag group below.
const serveLong = `Run a Protobase server on the data directory --data (created if missing),
serving the gRPC API on --grpc-addr and, when --metrics-addr is set,
Prometheus metrics at http://METRICS-ADDR/metrics.

--http-addr also serves the API as REST/JSON (HTTP/1.1 and HTTP/2 on one
port), with its OpenAPI description at /openapi.json, the web console at
/console/ (types, records, changes and health in a browser, on the REST
API with the user's key; docs/console.md) and the metrics at /metrics.
--nats runs an embedded NATS server on --nats-addr, or --nats-url joins an
external one, and serves the API as NATS request-reply on the subjects
PREFIX.schema.get, .schema.apply, .insert, .update, .upsert, .remove,
.query and .get (--nats-prefix, default "protobase"), in the queue group
--nats-queue, so that several servers share the load. With --auth, a client of the embedded
server logs in with its key (as the token), may publish only to the
subjects of its key's role, uses the key's inbox prefix and sends the same
key in the header: the server answers only into that key's inbox. See
docs/transports.md.

--store etcd keeps the data in an etcd v3 cluster (--etcd-endpoints) instead
of --data, under the key prefix --etcd-prefix, so that several servers can
serve one store: a write acknowledged by one is seen by reads that start
afterwards on any other. --data then holds only the admin key file. TLS to
etcd: --etcd-ca, --etcd-cert and --etcd-key; etcd auth: --etcd-user and
--etcd-password-file. A write batch is one etcd transaction, within the
cluster's --max-txn-ops and --max-request-bytes. A request the cluster does
not serve (a member or the leader lost) is attempted again until
--etcd-retry-timeout, each attempt bounded by --etcd-timeout: a member's
loss is a pause, and no batch is applied twice. See docs/scaling.md.

Every write is fsynced before it is acknowledged. --sync=false acknowledges
writes before they reach the disk: faster, but a crash or power loss can
lose acknowledged writes (the store itself is never corrupted).

The server logs to stderr at --log-level in --log-format (text or json):
one line per schema change, per index build start and end (type and index
names), and per Scan, Query page or Search request slower than
--slow-query, and gRPC's errors (each kind at most once per 10 s, with
the count held back); debug adds the storage engine's own
messages (flushes, compactions, WAL recovery) and gRPC's (a connection
that does not speak HTTP/2, say). With --log-format json the lines on
stdout saying where it serves are JSON objects too, and so is a failure to
start; durations are milliseconds in fields named *_ms.
It runs until SIGINT or SIGTERM; it then stops
accepting calls, lets in-flight calls (and write batches) finish, and exits
0. It exits 1 when it cannot start (for example, when the address is in use
or the data directory is locked by another server).

--tls-cert and --tls-key serve every listener (gRPC, REST, metrics, the
embedded NATS server) over TLS only; the files are reloaded on SIGHUP and
when they change, without dropping connections. --tls-client-ca also
requires client certificates (mutual TLS). Clients pass the CA with --tls-ca
(or $PROTOBASE_TLS_CA). The REST gateway serves browsers only from the
origins of --http-allowed-origins, and names (other than IP addresses and
localhost) only from --http-allowed-hosts. See docs/security.md.

--lab also serves the benchmark lab's service (protobase.lab.v1.Lab: an
echo that skips storage, a search sink that sends nothing back, and the
engine's counters), so that 'protobase-bench --addr' can run every
experiment against this server. Leave it off in production.

--auth requires an API key on every call (gRPC metadata, REST and NATS
header "authorization: Bearer KEY"; health checks stay open). It is on
whenever a listener is not on loopback; --insecure-no-auth is the only way
to run without it there, and the server then logs a warning. The first
start with authentication creates an admin key and writes it to
DATA/admin.key (mode 0600), or takes it from $PROTOBASE_ADMIN_KEY; manage
keys with protobase keys. See docs/security.md.

Every flag can also be set from the environment: PROTOBASE_ and the flag's
name in upper case with _ for - (--grpc-addr: $PROTOBASE_GRPC_ADDR), as
listed beside each flag below. A flag on the command line wins.

The global --addr flag is for client commands; serve listens on --grpc-addr.`

// addFlags registers serve's own flags; security and storage flags add
// theirs after these.
func (o *serveOptions) addFlags(f *pflag.FlagSet) {
	o.addListenerFlags(f)
	o.addLimitFlags(f)
	o.addSizeFlags(f)
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 0, "how long to let in-flight calls finish on shutdown before cutting them (0: 30s); calls still running 2s after the cut are abandoned and the process exits")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text (key=value) or json (one object a line)")
	f.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "export OpenTelemetry spans over OTLP/gRPC (plaintext) to this host:port: one per RPC, with write apply, commit wait, fsync and Search query, planning and store-read spans under it (empty: no tracing, at no cost)")
	f.Float64Var(&o.traceSampleRatio, "trace-sample-ratio", 1, "with --otlp-endpoint, the share of calls traced that arrive without a sampled traceparent (0 to 1); a call whose traceparent is sampled is always traced")
	f.DurationVar(&o.slowQuery, "slow-query", time.Second, "log each Scan, Query page and Search request (its queries run together) that runs longer than this, at info (0: never)")
	f.DurationVar(&o.ttlReapInterval, "ttl-reap-interval", time.Second, "how often to delete the records whose ttl expiry has passed, in batches of at most 1,000 (0: never; expired records stay on disk, absent to every read)")
	f.BoolVar(&o.lab, "lab", false, "also serve the benchmark lab's service (protobase.lab.v1.Lab), for protobase-bench --addr; not for applications")
	f.BoolVar(&o.auth, "auth", false, "require an API key on every call (on by default when a listener is not on loopback)")
	f.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "serve without API keys even on a listener that is not on loopback (anyone who can connect can do anything)")
}

// addListenerFlags registers where the server listens and what it serves.
func (o *serveOptions) addListenerFlags(f *pflag.FlagSet) {
	f.StringVar(&o.data, "data", "./protobase-data", "data directory")
	f.StringVar(&o.grpcAddr, "grpc-addr", "127.0.0.1:7070", "gRPC listen address, host:port (port 0 picks a free port)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "Prometheus metrics listen address, host:port (empty: no metrics)")
	f.StringVar(&o.httpAddr, "http-addr", "", "REST/JSON listen address, host:port, HTTP/1.1 and HTTP/2 (h2c, or over TLS with --tls-cert), also serving the web console at /console/ (empty: no REST)")
	f.BoolVar(&o.nats, "nats", false, "run an embedded NATS server on --nats-addr and serve the NATS API on it")
	f.StringVar(&o.natsAddr, "nats-addr", "127.0.0.1:4222", "embedded NATS server listen address, host:port (port 0 picks a free port); with --nats")
	f.StringVar(&o.natsURL, "nats-url", "", "serve the NATS API on this external NATS server, e.g. nats://host:4222 (exclusive with --nats)")
	f.StringVar(&o.natsPrefix, "nats-prefix", "protobase", "first token(s) of every NATS subject")
	f.StringVar(&o.natsQueue, "nats-queue", "protobase", "NATS queue group; servers in one group share the requests")
	f.Int64Var(&o.natsKeyRate, "nats-key-bytes-per-second", 0, "with keys, most request bytes one key brings to the NATS service per second; past it requests are refused and the embedded server closes the key's connections (0: 64 MiB/s; -1: no bound)")
	f.BoolVar(&o.sync, "sync", true, "fsync writes before acknowledging them; --sync=false is faster but risks losing acknowledged writes on a crash or power loss")
}

// addLimitFlags registers the bounds one client's requests are held to.
func (o *serveOptions) addLimitFlags(f *pflag.FlagSet) {
	f.IntVar(&o.maxMessageBytes, "max-message-bytes", 0, "largest gRPC message accepted, in bytes, at least 512 (0: 64 MiB)")
	f.IntVar(&o.maxBatchRecords, "max-batch-records", 0, "most records in one write batch (0: 10000)")
	f.IntVar(&o.maxBatchConds, "max-batch-conditions", 0, "most conditions in one write batch (0: 1000)")
	f.IntVar(&o.maxCondReads, "max-condition-reads", 0, "most records the query conditions of one write batch read together (0: 10000)")
	f.Int64Var(&o.maxInflightBytes, "max-inflight-bytes", 0, "the write budget: most bytes of write requests decoded and of batches not yet durable; as many more may wait for room (0: 256 MiB)")
	f.Uint32Var(&o.maxStreamsPerConn, "max-streams-per-conn", 0, "most concurrent gRPC streams on one connection (0: 100)")
	f.Int64Var(&o.maxResultBufferBytes, "max-result-buffer-bytes", 0, "most bytes of Search, Scan, Watch, Get and Query responses built and not yet written, server-wide (0: 256 MiB)")
	f.IntVar(&o.maxSearchQueries, "max-search-queries", 0, "most queries in one SearchRequest (0: 100000)")
	f.IntVar(&o.maxAggregateGroups, "max-aggregate-groups", 0, "most groups one aggregate query may produce; past it the query fails ResourceExhausted (0: 100000)")
	f.Int64Var(&o.maxReceiveBytes, "max-receive-buffer-bytes", 0, fmt.Sprintf("most bytes of gRPC messages begun and not complete, over all connections; past it the connection holding the most is closed (0: 1/8 of the memory available, at least 2 × --max-message-bytes; %s here)",
		sizeString(server.DefaultReceiveBudget(memsize.Usable(), 64<<20))))
	f.Int64Var(&o.maxReceivePerConn, "max-receive-bytes-per-conn", 0, "most bytes of gRPC messages begun and not complete on one connection; past it the connection is closed (0: min(--max-streams-per-conn, 4) × --max-message-bytes)")
	o.addConnFlags(f)
}

// addConnFlags registers what a client may hold by connecting alone.
func (o *serveOptions) addConnFlags(f *pflag.FlagSet) {
	f.DurationVar(&o.handshakeTimeout, "handshake-timeout", 0, fmt.Sprintf("time a new connection has, on every listener, for its TLS handshake and its protocol's opening (gRPC's HTTP/2 preface, a REST request's headers, a NATS CONNECT) before it is closed, at least 100ms (0: %s)", server.DefaultHandshakeTimeout))
	f.DurationVar(&o.idleTimeout, "idle-timeout", 0, fmt.Sprintf("close a gRPC connection without open streams, and a REST or metrics connection between requests, after this long, at least 100ms; clients reconnect when they next call (0: %s)", server.DefaultIdleTimeout))
	f.IntVar(&o.maxConnections, "max-connections", 0, fmt.Sprintf("most connections each listener (gRPC, REST, metrics, embedded NATS) holds open; past it a new connection is closed at once, and those open keep working (0: a quarter of what the file-descriptor limit leaves after %d for the store, at most %d; %d here; -1: no cap)",
		connlimit.StoreFiles, connlimit.MaxDefault, server.DefaultMaxConnections()))
}

// addSizeFlags registers the memory the store, its caches and the change
// log may use; their defaults follow the machine's memory.
func (o *serveOptions) addSizeFlags(f *pflag.FlagSet) {
	cache, memtable := pebble.DefaultSizes(memsize.Usable())
	f.Int64Var(&o.cacheBytes, "cache-bytes", 0, fmt.Sprintf("block cache size in bytes, at least 1 MiB (0: 1/8 of the memory available, 64 MiB to 4 GiB; %s here)", sizeString(cache)))
	f.Int64Var(&o.memTableBytes, "memtable-bytes", 0, fmt.Sprintf("size of one memtable in bytes, at least 4 MiB; writes stall while 4 are full (index entries have 4 of half the size; 0: 1/64 of the memory available, 16 to 128 MiB; %s here)", sizeString(memtable)))
	f.Int64Var(&o.goMemoryLimit, "go-memory-limit", 0, fmt.Sprintf("the Go runtime's soft memory limit for the process, at least 64 MiB (0: the memory available less the block cache, six memtables and an eighth; %s here; -1: none; GOMEMLIMIT wins)", sizeString(server.GoMemoryLimit(server.Config{}))))
	f.Int64Var(&o.recordCacheBytes, "record-cache-bytes", 0, fmt.Sprintf("most bytes of the hot-record cache serving primary-key lookups (0: 1/5 of the memory available, 64 MiB to 8 GiB; %s here; -1: no cache; none with --store etcd, where other servers write too)", sizeString(recordcache.DefaultBytes(memsize.Usable()))))
	f.DurationVar(&o.watchRetention, "watch-retention", server.DefaultWatchRetention, "how long the change log keeps changes for Watch, at least 1s (0: no change log, Watch is refused); not with --store etcd, where etcd's compaction decides")
	f.Int64Var(&o.watchRetBytes, "watch-retention-bytes", server.DefaultWatchRetentionBytes, "most bytes the change log keeps, oldest trimmed first (0: no byte bound); not with --store etcd")
	f.Int64Var(&o.watchTailBytes, "watch-tail-bytes", server.DefaultWatchTailBytes, "most bytes of the newest change-log entries kept in memory while watches run, for watchers at the tail (0: none, watchers read storage); not with --store etcd")
}
