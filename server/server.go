// Package server is the embeddable Protobase server: Start builds the store,
// the engine and the transports from a Config and runs them until Stop. The
// CLI's serve command, the integration tests and the benchmark lab all start
// servers through it, so they exercise the same wiring.
package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apistatus"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/certs"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/grpcbuf"
	"github.com/protobase/protobase/internal/recvbudget"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/pebble"
	grpctransport "github.com/protobase/protobase/internal/transport/grpc"
	labtransport "github.com/protobase/protobase/internal/transport/lab"
	"github.com/protobase/protobase/internal/watch"
)

// Config configures a server. The zero value of every field but DataDir is
// a sensible default; Validate says which values Start refuses.
type Config struct {
	// DataDir is the Pebble directory; created if missing. With Store
	// "etcd" it holds only the admin key file (see AdminKey).
	DataDir string
	// Store names the storage backend: "pebble" (the default, in DataDir)
	// or "etcd" (a cluster several servers may share, see Etcd).
	Store string
	// Etcd says how to reach the cluster when Store is "etcd".
	Etcd EtcdConfig
	// GRPCAddr is the gRPC listen address (default "127.0.0.1:7070"; port 0
	// picks a free port, see Server.Addr).
	GRPCAddr string
	// MetricsAddr, when set, serves Prometheus metrics at /metrics.
	MetricsAddr string

	// HTTPAddr, when set, serves the REST/JSON gateway (and the OpenAPI
	// description at /openapi.json) on this address, HTTP/1.1 and
	// HTTP/2 on one listener (HTTP/2 in cleartext by prior knowledge, or
	// over TLS with TLSCertFile); port 0 picks a free port, see
	// Server.HTTPAddr. A JSON object of a request body is bounded by
	// MaxMessageBytes.
	HTTPAddr string
	// HTTPLimits bound the time an HTTP client may hold the gateway
	// (header, body rate, writes, idle connections); see http_limits.go.
	HTTPLimits HTTPLimits
	// NATS runs an embedded NATS server on NATSAddr and serves the NATS
	// request-reply API on it. Exclusive with NATSURL.
	NATS bool
	// NATSAddr is the embedded NATS server's listen address (default
	// "127.0.0.1:4222"; port 0 picks a free port, see Server.NATSURL). Its
	// max_payload is MaxMessageBytes, at most 8 MiB.
	NATSAddr string
	// NATSURL, when set, serves the NATS API on an external NATS server
	// (for example "nats://127.0.0.1:4222"), reconnecting as needed.
	NATSURL string
	// NATSPrefix is the first part of every NATS subject (default
	// "protobase": protobase.query, protobase.get, ...).
	NATSPrefix string
	// NATSQueue is the queue group of the NATS endpoints (default
	// "protobase"): servers sharing it share the requests.
	NATSQueue string
	// NATSKeyBytesPerSecond bounds, with authentication, the request
	// bytes one key brings to the NATS service per second (0:
	// natstransport.DefaultKeyBytesPerSecond, 64 MiB/s; negative: no
	// bound). Past it a request is RESOURCE_EXHAUSTED, and the embedded
	// NATS server closes the key's connections (docs/limits.md).
	NATSKeyBytesPerSecond int64
	// NoSync acknowledges writes before they are fsynced. Faster, and a
	// crash or power loss can lose acknowledged writes (never corrupt the
	// store). For benchmarks; the default (false) is durable.
	NoSync bool
	// MaxMessageBytes caps one gRPC message received (default 64 MiB; at
	// least 512 bytes). What the server sends is bounded apart (see
	// DefaultMaxSendBytes).
	MaxMessageBytes int
	// MaxRecordsPerBatch caps the records of one write batch (default 10,000).
	MaxRecordsPerBatch int
	// MaxConditionsPerBatch caps the conditions of one write batch
	// (default 1,000), and MaxConditionReads the records its query
	// conditions read together (default 10,000); see docs/write.md.
	MaxConditionsPerBatch int
	MaxConditionReads     int
	// MaxInflightBytes caps the bytes of write batches applied at once
	// (default 256 MiB).
	MaxInflightBytes int64
	// SearchWorkers bounds the queries of one Search stream running at once
	// (default 2 × GOMAXPROCS).
	SearchWorkers int
	// MaxResultRecords and MaxResultBytes bound one result message of
	// Search and Scan (defaults 1,000 records, 1 MiB).
	MaxResultRecords int
	MaxResultBytes   int

	// Resource bounds against hostile or broken clients (docs/limits.md).
	// MaxStreamsPerConn caps the concurrent streams of one HTTP/2
	// connection (default 100).
	// MaxResultBufferBytes bounds the Search responses built and not yet
	// sent, server-wide (default 256 MiB). MaxSearchQueries caps the
	// queries of one SearchRequest (default 100,000).
	MaxStreamsPerConn    uint32
	MaxResultBufferBytes int64
	MaxSearchQueries     int
	// MaxAggregateGroups caps the groups of one aggregate query
	// (default 100,000; engine.DefaultMaxAggregateGroups).
	MaxAggregateGroups int
	// MaxReceiveBufferBytes bounds the bytes of gRPC messages begun and
	// not complete over all connections (default: 1/8 of the memory, at
	// least 2 × MaxMessageBytes): past it, the connection holding the
	// most is closed. MaxReceiveBytesPerConn bounds them on one
	// connection (default min(MaxStreamsPerConn, 4) × MaxMessageBytes):
	// past it, that connection is closed. See server/recvbudget.go.
	MaxReceiveBufferBytes  int64
	MaxReceiveBytesPerConn int64
	// Connections (server/conns.go). HandshakeTimeout bounds the opening
	// of a new connection on every listener: its TLS handshake and its
	// protocol's first words (gRPC's HTTP/2 preface, the headers of a
	// REST or metrics request, a NATS client's CONNECT); default
	// DefaultHandshakeTimeout. IdleTimeout closes a gRPC connection
	// without open streams, and a REST or metrics connection between
	// requests, after that long (default DefaultIdleTimeout; HTTPLimits
	// may set the HTTP ones apart). Both are at least 100 ms.
	// MaxConnections caps the connections each listener holds open at
	// once (0: DefaultMaxConnections, from the file-descriptor limit; -1:
	// no cap); past it a new connection is closed as soon as it is
	// accepted.
	HandshakeTimeout time.Duration
	IdleTimeout      time.Duration
	MaxConnections   int
	// CacheBytes sizes the block cache and MemTableBytes one memtable
	// (up to 4 exist before writes stall). 0 picks a size from the memory
	// the process may use (pebble.DefaultSizes): 1/8 of it for the cache,
	// from 64 MiB to 4 GiB, and 1/64 for a memtable, from 16 to 128 MiB.
	// Set, the cache takes at least 1 MiB and a memtable at least 4 MiB
	// (pebble.LeastMemTableBytes).
	CacheBytes    int64
	MemTableBytes int64
	// GoMemoryLimit is the Go runtime's soft memory limit, set at Start
	// for the whole process (debug.SetMemoryLimit). 0 derives it from the
	// memory the process may use: that memory less the block cache, six
	// memtables and an eighth (server/memory.go); -1 sets none; a limit
	// is at least 64 MiB. The environment's GOMEMLIMIT, when set, wins.
	GoMemoryLimit int64
	// RecordCacheBytes bounds the hot-record cache that serves
	// primary-key point reads without a storage seek (0: 1/5 of the
	// machine's memory, within [64 MiB, 8 GiB]; -1: no cache).
	RecordCacheBytes int64
	// WatchRetention is how long the change log keeps a commit's changes
	// for Watch (0: DefaultWatchRetention; negative: no change log, and
	// Watch is FAILED_PRECONDITION; positive: at least a second). WatchRetentionBytes also trims the
	// oldest entries beyond that many bytes (0:
	// DefaultWatchRetentionBytes; negative: no byte bound). Neither
	// applies with Store "etcd", where Watch reads etcd's own revisions
	// and etcd's compaction decides what is kept (docs/watch.md).
	WatchRetention      time.Duration
	WatchRetentionBytes int64
	// WatchTailBytes bounds the newest change-log entries kept in memory
	// while watches run, so that watchers at the tail read them without
	// storage (0: DefaultWatchTailBytes; negative: none, every watcher
	// reads storage). Not with Store "etcd".
	WatchTailBytes int64
	// ShutdownTimeout bounds the graceful part of Stop (default 30 s); after
	// it, remaining streams are cut, and those that do not end within 2 s
	// of the cut are abandoned (see Stop).
	ShutdownTimeout time.Duration
	// Logger receives server events and the storage engine's own
	// messages (Pebble's at debug level, its errors at error level); nil
	// discards them.
	Logger *slog.Logger
	// SlowQuery, when positive, logs each Scan, Query page and Search chunk that runs
	// longer, at info (0: none). The CLI's default is 1s.
	SlowQuery time.Duration
	// OTLPEndpoint, when set (host:port), exports OpenTelemetry spans
	// over OTLP/gRPC (plaintext) to it: one per RPC, with the engine's
	// spans under it (write apply, commit wait, fsync; Search queries,
	// their planning and store reads).
	// Empty: no tracing, at no cost.
	OTLPEndpoint string
	// TraceSampleRatio is the share of calls traced that arrive without
	// a sampled trace context (0 to 1); a call whose traceparent is
	// sampled is always traced. With OTLPEndpoint only.
	TraceSampleRatio float64
	// TTLReapInterval is how often the reaper deletes the records whose
	// ttl expiry has passed, in batches of at most 1,000 (0: every
	// second; negative: never, and expired records stay on disk, absent
	// to every read). The CLI's --ttl-reap-interval 0 is never.
	TTLReapInterval time.Duration
	// Lab registers the benchmark lab's service (protobase.lab.v1.Lab:
	// echo, sink and engine counters) beside the public API, for
	// `protobase-bench --addr`. Off by default: it is not for applications.
	Lab bool

	// Authentication (API keys; see docs/security.md and server/auth.go).
	// Auth requires a key on every call but health checks. It is on
	// anyway when a listener is not on loopback, unless InsecureNoAuth
	// (exclusive with Auth). AdminKey, in the key format, becomes the
	// admin key on the first start with auth and no key; without it a
	// new key is written to DataDir/admin.key (mode 0600).
	Auth           bool
	InsecureNoAuth bool
	AdminKey       string

	// --- transport security (tls.go) ---

	// TLSCertFile and TLSKeyFile (PEM), when set, make gRPC, REST, metrics
	// and the embedded NATS server accept TLS only. The files are reloaded
	// when they change (checked every TLSReloadInterval, default 10 s) and
	// on ReloadTLS, without dropping connections.
	TLSCertFile, TLSKeyFile string
	TLSReloadInterval       time.Duration
	// TLSClientCAFile (PEM) requires, on every listener, a client
	// certificate issued by one of its CAs (mutual TLS).
	TLSClientCAFile string
	// HTTPAllowedOrigins are the browser origins (scheme://host[:port])
	// the REST gateway serves, CORS included; others get 403 (default:
	// none). HTTPAllowedHosts are host names the Host header may carry
	// besides IP literals and localhost (DNS-rebinding protection).
	HTTPAllowedOrigins, HTTPAllowedHosts []string
	// NATSTLSCAFile (PEM) verifies the external NATS server (NATSURL) and
	// turns TLS on for that connection; NATSTLSCertFile and NATSTLSKeyFile
	// present a client certificate to it (a server with verify: true).
	NATSTLSCAFile, NATSTLSCertFile, NATSTLSKeyFile string

	// memFS, when set, holds DataDir in memory instead of on disk; only
	// tests set it (export_test.go, and internal/serverhook for the
	// power-cut test).
	memFS *pebble.MemFS
}

// Server is a running Protobase server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	st      store.KV
	eng     *engine.Engine
	watches *watch.Service
	gs      *grpc.Server
	lis     net.Listener
	health  *health.Server
	metrics *http.Server
	mlis    net.Listener
	// metricsHTTP serves /metrics on the metrics listener and the HTTP one.
	metricsHTTP http.Handler
	conns       connListeners // the capped listeners, for metrics (conns.go)
	tr          transports    // REST and NATS, see transports.go
	keys        *auth.Keyring
	auth        bool // callers must authenticate (see auth.go)
	svc         *grpctransport.Service
	certs       *certs.Reloader // nil without TLS, see tls.go
	recv        *recvbudget.Budget
	tracing     *tracing // nil without Config.OTLPEndpoint

	stopOnce sync.Once
	stopErr  error
	done     chan struct{}
	serveErr error
}

// Start opens the store and starts serving. ctx bounds only the start-up;
// call Stop to shut down. The gRPC and metrics listeners are bound before
// the store is opened, and a start that fails after creating a store in an
// empty DataDir removes it again, so a failed start leaves DataDir as it
// was (a fresh Pebble store preallocates a 64 MiB WAL).
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, done: make(chan struct{})}
	var fresh dirState
	if cfg.memFS == nil {
		fresh = stateOf(cfg.DataDir)
	}
	defer func() {
		if err != nil {
			s.abortStart(fresh)
		}
	}()
	if err := s.startTLS(); err != nil {
		return nil, err
	}
	s.newReceiveBudget()
	s.setMemoryLimit()
	if err := s.listen(); err != nil {
		return nil, err
	}

	m := newMetrics()
	if s.tracing, err = startTracing(cfg); err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	st, err := s.openStore()
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s.st = st
	eng, err := s.openEngine(ctx, m)
	if err != nil {
		return nil, err
	}
	s.eng = eng
	if err := s.startAuth(); err != nil {
		return nil, err
	}
	// A watch response stays within what clients receive by default
	// (64 MiB, the send limit less its 1 MiB of headroom).
	s.watches = watch.New(eng, watch.Options{MaxSendBytes: sendLimit(cfg) - 1<<20})
	s.svc = grpctransport.New(eng, grpctransport.Options{Keys: s.keys, Auth: s.auth, Logger: log, MaxSearchQueries: cfg.MaxSearchQueries,
		BackupScratch: backupScratch(cfg), Watches: s.watches})

	m.register(eng, st)
	registerBackupMetrics(m.reg, s.svc.BackupsRunning)
	registerReceiveMetrics(m.reg, s.recv)
	s.registerTLSMetrics(m.reg)
	if cfg.NATS || cfg.NATSURL != "" {
		registerNATSMetrics(m.reg, &s.tr.natsStats)
	}
	s.registerConnMetrics(m.reg)
	s.newGRPCServer(m, eng)

	s.metricsHTTP = s.requireKeyHTTP(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	if s.mlis != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", s.metricsHTTP)
		s.metrics = &http.Server{Handler: mux}
		// The REST gateway's limits: a metrics listener off loopback is as
		// exposed to slow and idle clients as the gateway is.
		s.cfg.HTTPLimits.apply(s.metrics)
		go func() { _ = s.serveHTTP(s.metrics, s.mlis) }()
	}
	if err := s.startTransports(); err != nil {
		return nil, err
	}

	go func() {
		s.serveErr = s.gs.Serve(s.grpcListener())
		close(s.done)
	}()
	s.setServing(healthpb.HealthCheckResponse_SERVING)
	log.Info("serving", "grpc", s.lis.Addr().String(), "data", cfg.DataDir, "sync", !cfg.NoSync, "auth", s.auth, "tls", s.TLS(),
		"max_connections", cfg.MaxConnections)
	return s, nil
}

// openEngine opens the engine on the server's store with the limits of
// its Config.
func (s *Server) openEngine(ctx context.Context, m *metrics) (*engine.Engine, error) {
	cfg := s.cfg
	eng, err := engine.Open(ctx, s.st, engine.Options{
		MaxRecordsPerBatch: cfg.MaxRecordsPerBatch,
		MaxMessageBytes:    cfg.MaxMessageBytes,
		MaxInflightBytes:   cfg.MaxInflightBytes,
		// Decoded write requests waiting for the write budget count as
		// received bytes do: the receive budget bounds them too.
		MaxWaitingWriteBytes: cfg.MaxReceiveBufferBytes,
		// A unary answer fits what gRPC sends (sendLimit) and what clients
		// take by default (64 MiB), with room for its envelope.
		MaxResponseBytes: sendLimit(cfg) - 2<<20,
		SearchWorkers:    cfg.SearchWorkers,
		MaxResultRecords: cfg.MaxResultRecords,
		MaxResultBytes:   cfg.MaxResultBytes,
		Logger:           s.log,
		SlowQuery:        cfg.SlowQuery,
		ObserveQuery:     m.observeQuery,
		Observer:         m.latency,
		Tracer:           s.tracing.engineTracer(),
		ReapInterval:     cfg.TTLReapInterval,

		MaxResultBufferBytes: cfg.MaxResultBufferBytes,
		RecordCacheBytes:     cfg.RecordCacheBytes,
		WatchRetention:       max(cfg.WatchRetention, 0),
		WatchRetentionBytes:  max(cfg.WatchRetentionBytes, 0),
		WatchTailBytes:       cfg.WatchTailBytes,

		MaxConditionsPerBatch: cfg.MaxConditionsPerBatch,
		MaxConditionReads:     cfg.MaxConditionReads,
		MaxAggregateGroups:    cfg.MaxAggregateGroups,
	})
	if err != nil {
		return nil, fmt.Errorf("open engine: %w", err)
	}
	return eng, nil
}

// newGRPCServer makes the gRPC server with the services, limits and
// codec of the server's Config.
func (s *Server) newGRPCServer(m *metrics, eng *engine.Engine) {
	srvMetrics := m.grpc
	cfg := s.cfg
	s.gs = grpc.NewServer(append(append(s.grpcCreds(),
		grpc.MaxRecvMsgSize(cfg.MaxMessageBytes),
		grpc.MaxSendMsgSize(sendLimit(cfg)),
		grpc.ChainUnaryInterceptor(srvMetrics.unaryInterceptor(), s.svc.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(srvMetrics.streamInterceptor(), s.svc.StreamInterceptor()),
		// Large windows keep batched streams from stalling on loopback and
		// LAN links; flow control still bounds memory per stream.
		grpc.InitialWindowSize(4<<20),
		grpc.InitialConnWindowSize(16<<20),
		// Large responses (a watch at the tail sends ~200 KB a batch, Scan
		// pages are larger) leave in writes of 256 KiB instead of 32 KiB:
		// fewer, larger writes took a quarter less CPU in the writer of a
		// watcher's connection, and less in its client's reads. The buffer
		// is shared, taken only while a connection writes.
		grpc.WriteBufferSize(256<<10),
		experimental.BufferPool(grpcbuf.Pool),
		// Calls run on goroutines kept for them (a new one only when all
		// are busy): a fresh goroutine per call starts on a small stack and
		// grows it, copying it, on every unary read, which took about a
		// tenth of a one-key Get's CPU time.
		grpc.NumStreamWorkers(streamWorkers()),
		grpc.ForceServerCodecV2(grpctransport.Codec{MaxQueries: cfg.MaxSearchQueries}),
	), append(boundOptions(cfg), s.tracing.serverOptions()...)...)...)
	s.svc.Register(s.gs)
	if cfg.Lab {
		labtransport.New(eng, !cfg.NoSync, cfg.MaxSearchQueries).Register(s.gs)
	}
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.gs, s.health)
	// Reflection resolves the runtime record types too, so grpcurl can
	// describe them. Both protocol versions, for older tools.
	ropts := reflection.ServerOptions{Services: s.gs, DescriptorResolver: schemaResolver{eng}, ExtensionResolver: protoregistry.GlobalTypes}
	reflectionv1.RegisterServerReflectionServer(s.gs, reflection.NewServerV1(ropts))
	reflectionv1alpha.RegisterServerReflectionServer(s.gs, reflection.NewServer(ropts))
	srvMetrics.initialize(s.gs)
}

// streamWorkers is how many goroutines the gRPC server keeps for calls. A
// stream holds its worker for as long as it is open, and a call that
// finds every worker busy gets a goroutine of its own, which grows its
// stack, copying it, on the way to the engine: so the pool is sized for
// the streams clients keep open and the calls in flight beside them (64
// per CPU, at least 128, at most 1,024). It is not larger because idle
// workers take calls in turn, and the collector shrinks the stack of one
// that waited long: the more workers, the more calls start on a stack
// shrunk since its worker's last call.
func streamWorkers() uint32 {
	return uint32(min(max(64*runtime.GOMAXPROCS(0), 128), 1024)) //nolint:gosec // within [128, 1024]
}

// DefaultMaxSendBytes is the least limit on one message the server sends,
// whatever MaxMessageBytes (a limit on what it receives) says: results are
// packed into messages of MaxResultBytes, a record alone may be as large
// as the message that inserted it, and a small receive limit must not make
// every answer fail.
const DefaultMaxSendBytes = 64 << 20

// sendLimit is the gRPC send limit: room for the largest record a client
// could have inserted, or for a full result message, plus their envelope.
func sendLimit(cfg Config) int {
	return max(cfg.MaxMessageBytes, cfg.MaxResultBytes, DefaultMaxSendBytes) + 1<<20
}

// listen binds the gRPC and metrics listeners: before the store is
// opened, so that an address in use fails the start before it touches
// DataDir.
func (s *Server) listen() error {
	lis, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.GRPCAddr, err)
	}
	s.lis = s.capConnections(lis, "grpc")
	if s.cfg.MetricsAddr != "" {
		mlis, err := net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", s.cfg.MetricsAddr, err)
		}
		s.mlis = s.capConnections(mlis, "metrics")
	}
	return nil
}

// abortStart undoes a failed Start: listeners, metrics, engine, store and
// TLS; and, when DataDir was missing or empty before (fresh), whatever the
// store wrote there. startTransports stops its own on failure.
func (s *Server) abortStart(fresh dirState) {
	for _, l := range []net.Listener{s.lis, s.mlis} {
		if l != nil {
			_ = l.Close()
		}
	}
	if s.metrics != nil {
		_ = s.metrics.Close()
	}
	_ = s.closeStorage() // the start-up error is the one to report
	if fresh != dirUsed && s.st != nil {
		if err := fresh.restore(s.cfg.DataDir); err != nil {
			s.log.Warn("remove the store of a failed start", "dir", s.cfg.DataDir, "err", err)
		}
	}
}

// dirState is what DataDir was before Start: missing, empty, or anything
// else (used, or unreadable), which a failed start leaves alone.
type dirState int

const (
	dirUsed dirState = iota
	dirMissing
	dirEmpty
)

func stateOf(dir string) dirState {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return dirMissing
	case err == nil && len(ents) == 0:
		return dirEmpty
	}
	return dirUsed
}

// restore brings a missing or empty dir back to that state.
func (d dirState) restore(dir string) error {
	if d == dirMissing {
		return os.RemoveAll(dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// setServing sets the health of the server as a whole ("") and of each
// gRPC service it serves, so that a check naming a service is answered.
func (s *Server) setServing(st healthpb.HealthCheckResponse_ServingStatus) {
	s.health.SetServingStatus("", st)
	for name := range s.gs.GetServiceInfo() {
		s.health.SetServingStatus(name, st)
	}
}

// boundOptions are the gRPC server's bounds against clients that hold
// resources without using them (docs/limits.md).
func boundOptions(cfg Config) []grpc.ServerOption {
	return []grpc.ServerOption{
		// The limit is announced in SETTINGS; a stream beyond it is
		// refused (REFUSED_STREAM), and grpc-go clients wait for a slot.
		grpc.MaxConcurrentStreams(cfg.MaxStreamsPerConn),
		// A connection must finish its TLS handshake and HTTP/2 preface
		// within HandshakeTimeout: grpc-go's default, 120 s, would let a
		// silent TCP connection hold a descriptor that long.
		grpc.ConnectionTimeout(cfg.HandshakeTimeout),
		// Pings find peers that vanished without closing the connection,
		// so what their streams hold is freed; a client may ping every
		// 10 s, also without streams, and no faster. A connection without
		// streams for IdleTimeout gets GOAWAY and is closed: answering
		// pings does not keep it.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second, MaxConnectionIdle: cfg.IdleTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}

// Addr returns the gRPC listen address (with the real port when 0 was asked).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// MetricsAddr returns the metrics listen address, or "".
func (s *Server) MetricsAddr() string {
	if s.mlis == nil {
		return ""
	}
	return s.mlis.Addr().String()
}

// Query runs a Query in-process: what the Query RPC answers, without a
// transport in between, for a program that embeds the server. Errors are
// gRPC statuses, as a client would see them.
func (s *Server) Query(ctx context.Context, req *pb.QueryRequest) (*pb.QueryResponse, error) {
	resp, h, err := s.eng.Query(ctx, req, 0)
	if err != nil {
		return nil, apistatus.Status(err).Err()
	}
	h.Release() // the caller's copy of the page is its own
	return resp, nil
}

// Get returns the stored record with the primary key of key (a record of
// the type, holding at least its primary-key fields), or nil when there is
// none: what the NATS get subject answers, in-process. Errors are gRPC
// statuses.
func (s *Server) Get(ctx context.Context, key *anypb.Any) (*anypb.Any, error) {
	rec, err := s.eng.Get(ctx, key)
	if err != nil {
		return nil, apistatus.Status(err).Err()
	}
	return rec, nil
}

// Stop shuts down gracefully: health turns NOT_SERVING, new calls are
// refused, in-flight calls (and so in-flight batches) get ShutdownTimeout
// to finish, then those still running are cut, and the engine and store
// close. A call that has not ended stopCutWait after its cut (stuck where
// no cancellation reaches, such as storage reading a damaged block) is
// abandoned: Stop then returns ErrStopAbandoned without closing the store,
// which recovers from its write-ahead log at the next start, as after a
// crash. So Stop returns within ShutdownTimeout + stopCutWait, plus the
// store's close when nothing was abandoned. Safe to call twice.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.stop()
		s.log.Info("stopped")
	})
	return s.stopErr
}

// ErrStopAbandoned is Stop's error when calls were still running after
// the shutdown timeout and their cut.
var ErrStopAbandoned = errors.New("server: calls still running after the shutdown timeout were abandoned; the store was not closed")

// stopCutWait bounds the wait for the calls cut at the shutdown timeout.
const stopCutWait = 2 * time.Second

func (s *Server) stop() error {
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	s.health.Shutdown()
	if s.watches != nil {
		// Watches never end on their own: end them first, or the
		// graceful stop would wait for them until its timeout.
		s.watches.Stop()
	}
	calls := make(chan struct{})
	go func() {
		defer close(calls)
		// REST and NATS call the engine without going through the gRPC
		// server: stop them first, with the same deadline.
		tctx, tcancel := context.WithDeadline(context.Background(), deadline)
		s.stopTransports(tctx)
		tcancel()
		s.stopGRPC(deadline)
		<-s.done
	}()
	select {
	case <-calls:
	case <-time.After(time.Until(deadline) + stopCutWait):
		s.log.Error("calls still running after the shutdown timeout and their cut; stopping without closing the store (it recovers from its write-ahead log at the next start)",
			"shutdown_timeout", s.cfg.ShutdownTimeout)
		if s.metrics != nil {
			_ = s.metrics.Close()
		}
		return ErrStopAbandoned
	}
	if s.metrics != nil {
		_ = s.metrics.Close()
	}
	return s.closeStorage()
}

// stopGRPC stops the gRPC server gracefully until deadline, then cuts the
// calls still running (their contexts end, their connections close) and
// waits for them to return.
func (s *Server) stopGRPC(deadline time.Time) {
	stopped := make(chan struct{})
	go func() {
		s.gs.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		s.log.Warn("graceful stop timed out; closing remaining streams")
		s.gs.Stop()
		<-stopped
	}
}

// Done is closed when the gRPC server has stopped serving.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) closeStorage() error {
	s.closeTLS()
	var errs []error
	if s.eng != nil {
		errs = append(errs, s.eng.Close())
	}
	if s.st != nil {
		errs = append(errs, s.st.Close())
	}
	errs = append(errs, s.tracing.shutdown())
	return errors.Join(errs...)
}

// schemaResolver resolves descriptors from the engine's current runtime
// schema first, then from the compiled-in registry.
type schemaResolver struct{ eng *engine.Engine }

var _ protodesc.Resolver = schemaResolver{}

func (r schemaResolver) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if reg := r.eng.Schema().Compiled.Registry; reg != nil {
		if fd, err := reg.FindFileByPath(path); err == nil {
			return fd, nil
		}
	}
	return protoregistry.GlobalFiles.FindFileByPath(path)
}

func (r schemaResolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if reg := r.eng.Schema().Compiled.Registry; reg != nil {
		if d, err := reg.FindDescriptorByName(name); err == nil {
			return d, nil
		}
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(name)
}
