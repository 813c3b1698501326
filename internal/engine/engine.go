// Package engine is the transport-free core of Protobase: it applies write
// batches, applies schemas, builds indexes, runs queries and checks index
// consistency. Every transport (gRPC, REST, NATS) is a thin adapter onto an
// *Engine; the errors it returns are internal/apierror's, which every
// transport maps to its own status the same way. Watch streams are
// internal/watch's, which reads the engine through WatchSource; the
// change log each write batch appends to is internal/changelog's.
//
// A write batch goes through three phases:
//
//  1. Prepare, concurrently with other writers: look up each record's type,
//     validate its bytes with protowire (never a full decode), and encode its
//     primary and index keys into a per-batch arena.
//  2. Apply, under writeMu: check existence and uniqueness against the store
//     and against earlier records of the same batch, build one storage batch
//     (records, index entries, change-log entry, commit sequence) and make
//     it visible.
//  3. Wait, outside the lock: wait until the WAL holding the batch is
//     fsynced. Writers that reach this point together share one fsync
//     (group commit); the WAL is ordered, so a batch is never durable
//     without every batch applied before it.
//
// Holding writeMu across phase 2 makes existence checks and the apply one
// atomic step, which is what ALREADY_EXISTS, NOT_FOUND and unique indexes
// need. Phase 2 only reads point keys and copies bytes; the expensive work
// (validation, key encoding) and the fsync are outside it. On a shared
// store (etcd) phase 2's reads are preconditions of the batch's
// transaction instead, checked by the store, and the batches of different
// streams run phase 2 and commit without writeMu, in flight together
// (sharedwrite.go).
package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/memsize"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/recordcache"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store"
)

// Options configure an Engine.
type Options struct {
	// MaxRecordsPerBatch caps the records of one write batch (0: 10,000).
	MaxRecordsPerBatch int
	// MaxConditionsPerBatch caps the conditions of one write batch (0:
	// 1,000): a transaction's commit carries one per record or query it
	// read.
	MaxConditionsPerBatch int
	// MaxConditionReads bounds the records the query conditions of one
	// write batch read together, their matches and the records their
	// filters pass over (0: 10,000); a batch that reads more is
	// RESOURCE_EXHAUSTED. They are read under the write lock: the bound
	// keeps one batch from holding it long.
	MaxConditionReads int
	// MaxMessageBytes is the largest request message the transports
	// accept. The engine does not enforce it; GetSchema reports it so that
	// clients can size their batches (0: not reported).
	MaxMessageBytes int
	// MaxInflightBytes is the write budget (0: 256 MiB): the bytes of
	// write requests decoded and of storage batches not yet durable,
	// across all streams (writebudget.go). A batch waits for room, which
	// stops its stream from reading and so pushes back on the client
	// through flow control; a batch larger than the whole budget, or one
	// that finds as many bytes already waiting, is RESOURCE_EXHAUSTED.
	MaxInflightBytes int64
	// MaxWaitingWriteBytes bounds the bytes of decoded write requests
	// waiting for room in the write budget (0: MaxInflightBytes); a
	// request that finds it full is RESOURCE_EXHAUSTED.
	MaxWaitingWriteBytes int64
	// Logger receives background events (index builds); nil discards.
	Logger *slog.Logger
	// SlowQuery, when positive, logs one info line for each Scan,
	// Query page and Search chunk that runs longer (type, plan, records, time).
	SlowQuery time.Duration
	// ObserveQuery, when set, is called once per Scan and per Query page
	// that ran, with the call's name, the plan's access path and how long
	// it took (for latency histograms).
	ObserveQuery func(call, access string, took time.Duration)
	// Observer, when set, receives the timings of writes, Search, Get
	// and Watch (for latency histograms; see Observer).
	Observer Observer
	// Tracer, when set, adds spans to the calls whose context carries a
	// recording span: a write batch's apply, commit wait and fsync, each
	// Search query (with its planning and store reads) or run of
	// lookups. Nil: no spans, no cost.
	Tracer trace.Tracer

	// SearchWorkers bounds the queries of one Search stream running at
	// once (0: 2 × GOMAXPROCS).
	SearchWorkers int
	// MaxResultRecords and MaxResultBytes bound one result message
	// (0: 1,000 records, 1 MiB).
	MaxResultRecords int
	MaxResultBytes   int
	// MaxResultBufferBytes bounds, server-wide, the Search responses
	// built and not yet sent (0: 256 MiB); see resultBudget.
	MaxResultBufferBytes int64
	// MaxResponseBytes bounds the records of one unary answer, a Get or
	// a Query page, in bytes as it is built (0: 64 MiB): a Get lists the
	// keys left over as unanswered, a page ends early with a token.
	MaxResponseBytes int
	// MaxPageSize caps Query's page_size (0: 10,000; the default page is 1,000).
	MaxPageSize int
	// MaxAggregateGroups bounds the groups of one aggregate query
	// (0: DefaultMaxAggregateGroups).
	MaxAggregateGroups int
	// QueryLimits bound the size of one query's expression.
	QueryLimits query.Limits
	// RecordCacheBytes bounds the hot-record cache that serves
	// primary-key point reads (0: recordcache.DefaultBytes, which follows
	// the machine's memory; negative: no cache).
	RecordCacheBytes int64

	// WatchRetention, when positive on a store that is not Shared, turns
	// the change log (internal/changelog) on: every write batch also
	// writes what it changed, and entries older than this are trimmed (0:
	// no log; Watch is FAILED_PRECONDITION). On a Shared store
	// implementing store.Feed, Watch reads the store's own revisions
	// instead and these options do not apply.
	WatchRetention time.Duration
	// WatchRetentionBytes, when positive, also trims the log's oldest
	// entries beyond this many bytes.
	WatchRetentionBytes int64
	// WatchTrimInterval is how often the log is trimmed (0: 1 s).
	WatchTrimInterval time.Duration
	// Clock is the wall clock the change log's entry times and trimming
	// by age follow (nil: time.Now); the log's time keeps to the
	// monotonic clock's pace when it jumps (changelog's clock.go).
	Clock func() time.Time
	// Now is the clock reads compare record expiries with (nil:
	// time.Now): a record whose expiry is at or before Now() reads as
	// absent (expiry.go).
	Now func() time.Time
	// ReapInterval is how often the reaper deletes the records that have
	// expired (reap.go; 0: DefaultReapInterval, negative: never, and
	// expired records stay on disk, absent to reads, until Reap runs).
	ReapInterval time.Duration
	// ReapBatch bounds the records of one reaper batch (0:
	// DefaultReapBatch; at most MaxRecordsPerBatch).
	ReapBatch int
	// WatchTailBytes bounds the newest log entries kept in memory while
	// watches run, so that watchers at the tail of the log read them
	// without storage (changelog's tail.go; 0: DefaultWatchTailBytes,
	// negative: none).
	WatchTailBytes int64
}

// The defaults of Options.MaxConditionsPerBatch and MaxConditionReads.
const (
	DefaultMaxConditionsPerBatch = 1000
	DefaultMaxConditionReads     = 10000
)

// DefaultWatchTailBytes is the default of Options.WatchTailBytes.
const DefaultWatchTailBytes = changelog.DefaultTailBytes

// Engine is safe for concurrent use.
//
// Lock order: schemaMu before writeMu; the change log's syncMu before
// writeMu (changelog.Log.Sync takes it through syncApplied); under
// writeMu, the change log's locks (its tail's, watermarks' and clock's)
// and the record cache's. The catalog is immutable and swapped
// atomically; readers load it without locks.
type Engine struct {
	st   store.KV
	opts Options
	log  *slog.Logger

	cat atomic.Pointer[catalog]

	// schemaMu serializes schema changes and index-state transitions.
	schemaMu sync.Mutex

	// builds holds the progress of the index builds running here, by
	// type and index name (*buildProgress; build.go).
	builds sync.Map

	// writeMu guards the check-then-apply step of writes, index build
	// chunks, schema commits and API key changes, and the commit
	// sequence. The change log's writer calls (changelog.Log's Put and
	// Applied) run under it, in commit order.
	writeMu struct {
		sync.Mutex
		seq uint64 // last commit sequence applied (visible, maybe not yet durable)
	}

	// pipeGate lets the write batches of a shared store be in flight
	// together (held shared, by each batch's phase 2 and transaction) and
	// a batch that keeps losing its preconditions re-check alone (held
	// exclusively): sharedwrite.go. Lock order: pipeGate before writeMu.
	pipeGate sync.RWMutex

	// clog is the change log: entries written in the write batch, the
	// watermarks watchers read up to, trimming (internal/changelog).
	// Off on a Shared store and with no retention.
	clog *changelog.Log

	// buildMu guards builds: the indexes this engine runs a builder for.
	buildMu struct {
		sync.Mutex
		builds map[uint32]bool
	}

	// bg tracks background index builds; cancel stops them on Close.
	bg     sync.WaitGroup
	bgCtx  context.Context
	cancel context.CancelFunc

	closed atomic.Bool

	// inflight is the write budget: the bytes of write requests decoded
	// and of storage batches not yet durable (writebudget.go); waiting
	// bounds the bytes of decoded requests waiting for room in it.
	inflight *budget
	waiting  *budget
	// results bounds the bytes of Search responses built and not yet
	// sent, over all streams (see responder.reserve).
	results *semaphore.Weighted

	stats Stats

	// cache serves single-key primary-key reads; writes invalidate it
	// under writeMu (see recordcache). nil when disabled.
	cache *recordcache.Cache
	// sortPoints says whether Search sorts a chunk's point lookups by
	// key: set when more than 1/8 of the last chunk's missed the cache.
	sortPoints atomic.Bool

	// commits counts committed batches for Observer.GroupCommit.
	commits commitCounts

	// secret signs page tokens; immutable after Open.
	secret []byte
}

// Stats are cumulative counters, safe to read concurrently.
type Stats struct {
	Batches     atomic.Uint64
	Records     atomic.Uint64
	WriteErrors atomic.Uint64
	// Queries counts queries run; PointLookups the primary-key point reads
	// among them; RecordsRead the records read from storage by queries.
	Queries      atomic.Uint64
	QueryErrors  atomic.Uint64
	PointLookups atomic.Uint64
	RecordsRead  atomic.Uint64
	// OpBatches and OpRecords count the batches and records applied, by
	// write operation (indexed by Op; index 0 is unused).
	OpBatches [OpPatch + 1]atomic.Uint64
	OpRecords [OpPatch + 1]atomic.Uint64
	// Watches counts the Watch calls running; WatchChanges the changes
	// they have sent.
	Watches      atomic.Int64
	WatchChanges atomic.Uint64
	// expired counts the expired records deleted (by the reaper, or
	// before a write replaced them), by type name (*atomic.Uint64 values).
	expired sync.Map
}

// addExpired counts n expired records of type typ deleted.
func (s *Stats) addExpired(typ protoreflect.FullName, n int) {
	if n == 0 {
		return
	}
	c, ok := s.expired.Load(string(typ))
	if !ok {
		c, _ = s.expired.LoadOrStore(string(typ), new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(uint64(n))
}

// Expired returns the expired records of type typ deleted.
func (s *Stats) Expired(typ string) uint64 {
	if c, ok := s.expired.Load(typ); ok {
		return c.(*atomic.Uint64).Load()
	}
	return 0
}

// Open loads the schema state and commit sequence from st and resumes any
// index build that a previous process left unfinished. The engine does not
// own st: the caller closes it after Close.
func Open(ctx context.Context, st store.KV, opts Options) (*Engine, error) {
	opts.withDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{st: st, opts: opts, log: log,
		inflight: newBudget(opts.MaxInflightBytes), waiting: newBudget(opts.MaxWaitingWriteBytes),
		results: semaphore.NewWeighted(opts.MaxResultBufferBytes)}
	e.bgCtx, e.cancel = context.WithCancel(context.Background())
	if opts.RecordCacheBytes == 0 {
		opts.RecordCacheBytes = recordcache.DefaultBytes(memsize.Usable())
	}
	if !st.Shared() {
		// On a store other servers write too (etcd), this process does not
		// see every write before it becomes visible: a cache could serve
		// a record another server has since changed. No cache there.
		e.cache = recordcache.New(opts.RecordCacheBytes)
	}
	e.sortPoints.Store(true)

	cat, err := e.loadSchema()
	if err != nil {
		return nil, err
	}
	if err := e.markFormat(cat); err != nil {
		return nil, err
	}
	e.cat.Store(cat)
	if f, ok := st.(store.SpanFilterer); ok {
		// No bloom filters for non-unique indexes: see rangedOnly.
		f.SetUnfilteredSpans(e.rangedOnly)
	}

	if e.secret, err = loadSecret(st); err != nil {
		return nil, err
	}

	raw, found, err := st.Get(keySeq, nil)
	if err != nil {
		return nil, fmt.Errorf("read commit sequence: %w", err)
	}
	if found && len(raw) == 8 {
		e.writeMu.seq = binary.BigEndian.Uint64(raw)
	}

	e.clog, err = changelog.Open(st, e.writeMu.seq, changelog.Options{
		Retention: opts.WatchRetention, RetentionBytes: opts.WatchRetentionBytes,
		TailBytes: opts.WatchTailBytes, Clock: opts.Clock, SyncApplied: e.syncApplied, Logger: log})
	if err != nil {
		return nil, err
	}
	if e.clog.On() {
		interval := opts.WatchTrimInterval
		if interval <= 0 {
			interval = time.Second
		}
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			e.clog.TrimEvery(e.bgCtx, interval)
		}()
	}

	e.startBuilds(cat)
	e.watchSchema()
	if opts.ReapInterval > 0 {
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			e.reapEvery(opts.ReapInterval)
		}()
	}
	return e, nil
}

// syncApplied makes every batch applied so far durable, for the change
// log's Sync (a watcher's, when a batch stays applied but not durable: its
// writer has not waited for its sync). It writes the commit sequence
// again, unchanged, with a sync: the WAL is synced in order, so every
// batch before it is durable too. It returns the commit made durable, 0
// when every applied one is already.
func (e *Engine) syncApplied() (uint64, error) {
	b := e.st.NewWriteBatch()
	defer b.Close()
	var v [8]byte
	e.writeMu.Lock()
	seq := e.writeMu.seq
	if seq <= e.clog.Durable().Value() {
		e.writeMu.Unlock()
		return 0, nil
	}
	binary.BigEndian.PutUint64(v[:], seq)
	b.Set(keySeq, v[:])
	err := e.st.ApplyBatch(b)
	e.writeMu.Unlock()
	if err == nil {
		err = b.Wait()
	}
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// withDefaults fills each limit left at zero (or below) with its default.
func (opts *Options) withDefaults() {
	if opts.MaxRecordsPerBatch <= 0 {
		opts.MaxRecordsPerBatch = 10000
	}
	if opts.MaxConditionsPerBatch <= 0 {
		opts.MaxConditionsPerBatch = DefaultMaxConditionsPerBatch
	}
	if opts.MaxConditionReads <= 0 {
		opts.MaxConditionReads = DefaultMaxConditionReads
	}
	if opts.MaxInflightBytes <= 0 {
		opts.MaxInflightBytes = 256 << 20
	}
	if opts.MaxWaitingWriteBytes <= 0 {
		opts.MaxWaitingWriteBytes = opts.MaxInflightBytes
	}
	if opts.SearchWorkers <= 0 {
		opts.SearchWorkers = 2 * runtime.GOMAXPROCS(0)
	}
	if opts.MaxResultRecords <= 0 {
		opts.MaxResultRecords = 1000
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = 1 << 20
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 64 << 20
	}
	if opts.MaxPageSize <= 0 {
		opts.MaxPageSize = 10000
	}
	if opts.MaxAggregateGroups <= 0 {
		opts.MaxAggregateGroups = DefaultMaxAggregateGroups
	}
	if opts.MaxResultBufferBytes <= 0 {
		opts.MaxResultBufferBytes = 256 << 20
	}
	if opts.ReapInterval == 0 {
		opts.ReapInterval = DefaultReapInterval
	}
	if opts.ReapBatch <= 0 {
		opts.ReapBatch = DefaultReapBatch
	}
}

// Close stops background work. In-flight calls should have finished; the
// store stays open for the caller to close.
func (e *Engine) Close() error {
	e.buildMu.Lock() // no builder starts once closed is set
	if e.closed.Swap(true) {
		e.buildMu.Unlock()
		return nil
	}
	e.buildMu.Unlock()
	e.cancel()
	e.bg.Wait()
	return nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() *Stats { return &e.stats }

// Schema returns the current schema state (immutable).
func (e *Engine) Schema() *schema.State { return e.cat.Load().state }

// Flush writes the memtables to storage files; for tests and tools that
// need data on disk (parallel scans split at file boundaries).
func (e *Engine) Flush() error { return e.st.Flush() }

// Compact compacts the whole store (see internal/store/pebble's
// Store.Compact): after a bulk load, reads then meet one sorted run and no
// background compaction.
func (e *Engine) Compact(ctx context.Context) error { return e.st.Compact(ctx) }

// Store returns the store the engine reads and writes.
func (e *Engine) Store() store.KV { return e.st }

// ChangeLog returns the engine's change log (off on a Shared store, and
// without retention).
func (e *Engine) ChangeLog() *changelog.Log { return e.clog }

// Options returns the engine's options, with the defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Done returns a channel closed when the engine closes.
func (e *Engine) Done() <-chan struct{} { return e.bgCtx.Done() }
