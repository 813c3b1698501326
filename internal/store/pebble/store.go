// Package pebble implements the storage contract (internal/store's KV) on
// Pebble, embedded in one process: the store of a single server. It is
// the only package that imports Pebble; the engine sees the contract
// only, and the server opens the store with the engine's key layout
// (Options.Layout), so that nothing here parses a key.
//
// It owns:
//   - opening and closing the Pebble directory with tuned options (newest
//     on-disk format, bloom filters on every level, L0 and memtable sizing for
//     ingest-heavy use, tables cut at the key space's span boundaries and
//     one flushed table per span, Pebble's own log through slog), and its
//     default sizes (sizes.go);
//   - the directory: its marker file and the refusal of another program's
//     files (marker.go), one store per directory (lock.go);
//   - the index instance (index.go): a second Pebble instance in Dir/index
//     holding the index entries with level 0 merged in tiers, kept in step
//     with the main one through a journal in the main instance's log;
//   - atomic write batches (Batch) and their durability (fsync with group
//     commit); the write-ahead log's disk space, reserved as its files
//     grow instead of a memtable's worth each (walspace.go);
//   - reads: point gets (read.go), bounded iterators (iter.go) and
//     consistent snapshots (snapshot.go);
//   - range deletion (Batch.DeleteRange);
//   - split points (split.go) and a storage size/metrics summary (Metrics,
//     EstimateSize);
//   - a full disk (diskfull.go): writes refused with store.ErrDiskFull while
//     Pebble cannot write its tables, its retries paced, its errors
//     logged at a bounded rate;
//   - the filesystem seam (Options.FS, MemFS) on which tests cut the power,
//     dropping every byte that was not synced, or fill the disk.
//
// # Durability
//
// The store keeps the contract's durability guarantees (internal/store's
// package doc) with Pebble's write-ahead log. Store.Apply (ApplyBatch
// calls it) writes the batch to the log and makes it visible without
// waiting for the fsync; Batch.Wait waits for the fsync and reports its
// error. Store.Commit is Apply followed by Wait. Open syncs the entry of
// a directory it creates, so that a power cut right after Open does not
// lose the store with its directory.
//
//   - Visible before durable: a reader can observe a batch that a crash
//     before its fsync loses.
//   - Prefix durability: batches are appended to a single WAL in commit
//     order, and recovery replays a prefix of that WAL.
//   - Group commit: Pebble starts the next fsync as soon as the previous
//     one finishes, so batches share an fsync only when they arrive while
//     one is in flight: with 2 committers of 1-record batches each fsync
//     typically still covers one batch, with 8 about four (see
//     Options.WALMinSyncInterval).
//   - An empty batch is not written to the WAL.
//
// With Options.Sync = false, Apply writes the batch to the WAL without any
// fsync and Wait returns immediately. Recently acknowledged batches may be lost
// on power loss or kill -9 (the WAL tail sits in Pebble's user-space buffer for
// a short while), but the store is never corrupted and the prefix property
// still holds: what survives is always a prefix of the commit order. A clean
// Close flushes and syncs the WAL in both modes.
//
// # Concurrency
//
// Store and Snapshot are safe for concurrent use. Batch and Iter are not: each
// must be used by one goroutine at a time. Close must be called once, after all
// iterators and snapshots are closed; operations issued after Close return
// ErrClosed instead of panicking.
package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/protobase/protobase/internal/memsize"
	"github.com/protobase/protobase/internal/store"
)

var (
	// ErrClosed is returned by Store and Snapshot methods, and by Apply and
	// Commit, after Store.Close.
	ErrClosed = errors.New("store: closed")
	// ErrReadOnly is returned by write operations on a Store opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("store: read-only")
	// ErrLocked is returned by Open when another store, in this process or
	// another one, has the directory open.
	ErrLocked = errors.New("store: directory in use by another store")
)

// Options configures Open.
type Options struct {
	// Dir is the directory that holds the Pebble files. Open creates it if it
	// is missing (unless ReadOnly).
	Dir string
	// Layout is the caller's key space: which keys the index instance
	// holds, where tables end, where the store's own keys go. Required;
	// the engine's is internal/keyspace's Layout.
	Layout Layout
	// FS, when set, holds Dir instead of the operating system's filesystem:
	// tests cut the power on it or fill it (see MemFS). Nil means the real
	// disk.
	FS *MemFS
	// Sync: when true (the default the caller passes), Commit returns only
	// after the batch is fsynced, and Wait waits for the fsync.
	// False risks losing recently acknowledged batches on power loss or
	// kill -9 (not corruption).
	Sync bool
	// CacheBytes is the block cache size; 0 means the default for the
	// machine's memory (DefaultSizes(memsize.Usable())).
	CacheBytes int64
	// MemTableBytes is the size of one memtable; 0 means the default for
	// the machine's memory (DefaultSizes(memsize.Usable())). Up to
	// MemTableStopWrites memtables may exist before writes stall. The
	// index instance (index.go) has memtables of half this size, as many,
	// and shares the block cache.
	MemTableBytes int64
	// WALMinSyncInterval, if positive, is the minimum time between WAL
	// fsyncs: sync requests arriving faster are delayed so that more batches
	// share one fsync. Pebble syncs as soon as the previous sync finishes, so
	// with few concurrent committers each fsync usually covers a single batch;
	// an interval trades commit latency for fewer fsyncs. It only pays off
	// with many concurrent committers: with 2 committers and 1-record batches,
	// 500µs cut throughput ~10x in benchmarks (each commit waits out the
	// timer). 0 (the default) adds no delay.
	WALMinSyncInterval time.Duration
	// AsyncIndexBytes is the size of a batch's index writes from which
	// Apply holds them back, to apply them to the index instance with
	// those of the batches after it, on a goroutine of its own while the
	// caller goes on (index.go, indexhold.go). 0 means 16 KiB
	// (asyncIndexBytes); 1 holds every batch's, which tests use to run
	// that path with small batches.
	AsyncIndexBytes int
	// IndexHoldBytes is how much of such index writes (batches from
	// AsyncIndexBytes) Apply holds back before it applies them together,
	// each key once, to the index instance (indexhold.go): a read of the
	// index instance applies them first. 0 means 256 KiB; 1 applies each
	// batch's on its own, as soon as it is held.
	IndexHoldBytes int
	// singleInstance creates a new store without an index instance, as
	// stores were before it: tests open one to check that such stores
	// keep working.
	singleInstance bool
	// ungrouped creates a new store whose index instance keeps every key
	// on its own, as index instances were before entry groups (groups.go).
	ungrouped bool
	// ReadOnly opens an existing store without write access. Open fails if
	// Dir does not exist; Apply, Commit and Flush return ErrReadOnly.
	ReadOnly bool
	// Logger receives Pebble's own messages (nil discards them): its
	// informational ones (flushes, compactions) at debug level, its errors
	// at error level, those of failed flushes and compactions (which
	// Pebble retries) at most once every 10 s (diskfull.go). A fatal
	// message is logged (to stderr when Logger would drop it) and
	// terminates the process, as Pebble cannot continue after, for
	// example, a failed WAL write.
	Logger *slog.Logger
}

// The store, its snapshots, iterators and batches are the contract's. They
// fit an interface value as they are: the contract's methods add no
// allocation.
var (
	_ store.KV           = (*Store)(nil)
	_ store.ReadSnapshot = (*Snapshot)(nil)
	_ store.Iterator     = (*Iter)(nil)
	_ store.WriteBatch   = (*Batch)(nil)
	_ store.SpanFilterer = (*Store)(nil)
)

// Store is an open Pebble database. It is safe for concurrent use by multiple
// goroutines. Once Close has been called, methods that can fail return
// ErrClosed instead of panicking (Metrics returns the zero value); Close
// itself waits for in-flight Get, Apply, Flush and iterator or snapshot
// creation calls to finish.
type Store struct {
	db *pebble.DB
	// index is the index instance (index.go); nil for a store that keeps
	// its index entries in db. Immutable after Open.
	index *indexInstance
	// groups says the index instance keeps entries in groups (groups.go).
	// Immutable after Open.
	groups bool
	// layout is Options.Layout as Open read it. Immutable.
	layout *keyLayout
	// recs tells records' bytes from their versions (version.go).
	// Immutable after Open.
	recs     *records
	fs       vfs.FS
	logger   *slog.Logger // never nil
	dir      string
	sync     bool
	readOnly bool
	release  func() // gives up the claim on dir (see claimDir)

	// mu guards the transition to closed: every call into db holds mu.RLock
	// and checks closed, Close takes mu.Lock. Pebble panics when used after
	// Close, so this turns use-after-close into ErrClosed.
	mu     sync.RWMutex
	closed atomic.Bool

	// unfiltered is SetUnfilteredSpans' function; nil filters every table.
	unfiltered atomic.Pointer[func(key []byte) bool]

	stalls     atomic.Int64
	stallStart atomic.Int64 // unix nanos of the current stall, 0 if none
	stallNanos atomic.Int64

	// disk is whether the disk takes the store's tables (diskfull.go).
	disk *diskState

	// bufs keeps large batches' buffers for reuse (batchbuf.go).
	bufs batchBufs
}

// Open opens (creating if needed) the store in o.Dir.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("store: open: Options.Dir is empty")
	}
	if o.MemTableBytes > 0 && o.MemTableBytes < LeastMemTableBytes {
		return nil, fmt.Errorf("store: open: MemTableBytes %d is below the least, %d", o.MemTableBytes, LeastMemTableBytes)
	}
	layout, err := newKeyLayout(o.Layout)
	if err != nil {
		return nil, err
	}
	fs := vfs.Default
	if o.FS != nil {
		fs = o.FS.vfs
	}
	release, err := claimDir(o.FS, o.Dir)
	if err != nil {
		return nil, err
	}
	kind, err := openDir(fs, o, layout)
	if err != nil {
		release()
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{dir: o.Dir, layout: layout, sync: o.Sync, readOnly: o.ReadOnly, release: release, fs: fs, logger: logger,
		disk: newDiskState(o.Dir, logger)}
	po := s.pebbleOptions(o)
	po.FS = walSpaceFS{FS: fs, most: pebbleWALReserve(po.MemTableSize)}
	if o.FS == nil {
		// What Pebble wraps the disk in when given none: health checks
		// (a slow disk is reported). The index instance has no log and
		// gets Pebble's default (openIndex).
		po.WithFSDefaults()
	}
	defer po.Cache.Unref()
	db, err := pebble.Open(o.Dir, po)
	if err != nil {
		release()
		if lockedByOther(err) {
			err = fmt.Errorf("%w: %w", ErrLocked, err)
		}
		return nil, fmt.Errorf("store: open pebble at %s: %w", o.Dir, err)
	}
	s.db = db
	if err := s.openIndex(o, fs, po); err != nil {
		_ = db.Close()
		release()
		return nil, err
	}
	if err := s.openRecords(o.ReadOnly); err != nil {
		_ = s.Close()
		return nil, err
	}
	if kind == dirLegacy && !o.ReadOnly {
		if err := writeMarker(fs, o.Dir); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// pebbleOptions translates Options into tuned Pebble options.
func (s *Store) pebbleOptions(o Options) *pebble.Options {
	cacheBytes, memBytes := o.CacheBytes, o.MemTableBytes
	if cacheBytes <= 0 || memBytes <= 0 {
		c, m := DefaultSizes(memsize.Usable())
		if cacheBytes <= 0 {
			cacheBytes = c
		}
		if memBytes <= 0 {
			memBytes = m
		}
	}
	maxCompactions := min(max(runtime.GOMAXPROCS(0), 2), 8)

	po := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		// One cache for both instances (index.go); Open drops this
		// reference once they hold theirs.
		Cache:        pebble.NewCache(cacheBytes),
		MemTableSize: uint64(memBytes),
		// Up to 4 memtables (one being written, up to three waiting to be
		// flushed) absorb ingest bursts before writes stall.
		MemTableStopWritesThreshold: MemTableStopWrites,
		// Start compacting L0 early so it stays shallow (cheap reads), but
		// tolerate a deep L0 under heavy ingest before stopping writes.
		L0CompactionThreshold: 2,
		L0StopWritesThreshold: 36,
		LBaseMaxBytes:         64 << 20,
		// Flush memtables holding range deletions promptly so the space they
		// cover can be reclaimed by compactions.
		FlushDelayDeleteRange: 10 * time.Second,
		CompactionConcurrencyRange: func() (int, int) {
			return 1, maxCompactions
		},
		Logger:        newPebbleLogger(o.Logger),
		ReadOnly:      o.ReadOnly,
		EventListener: s.eventListener(instMain),
	}
	// End every flushed or compacted table at the key space's span
	// boundaries (the layout's: the change log, each record type, each
	// index; and the store's own keys): a table that reached from the
	// newest log entries into the records, or from one type's newest keys
	// into the next type, overlapped every later flush of both, so their
	// keys were rewritten at each level on the way down instead of moved
	// there.
	po.Experimental.SpanPolicyFunc = func(start []byte) (pebble.SpanPolicy, []byte, error) {
		return pebble.SpanPolicy{}, s.layout.tableEnd(start), nil
	}
	// Write tables in row blocks (sstable format Pebblev4), not Pebble's
	// columnar blocks. Under sustained ingest with a secondary index, most
	// of the CPU flushes and compactions spend is per key, and the columnar
	// writer's is higher (it re-measures the block for every key it adds):
	// with row blocks the lab's 15 s of two-index ingest ran 10 % faster
	// overall and kept 0.90 of its first second instead of 0.83. A point
	// read that misses the record cache pays about 15 % more in Pebble
	// (docs/performance.md); ranges and scans are the same. The store's
	// format version is unchanged, and tables written either way read
	// either way, so a store written before keeps working as it compacts.
	po.Experimental.EnableColumnarBlocks = func() bool { return false }
	// A flush writes one table per span, however large: the span policy
	// already cuts tables where spans end, and a span that only appends
	// (the change log, a type's records under rising keys, an index of
	// rising values) then leaves one table per flush beyond everything
	// below it, which Pebble moves down to the base level instead of
	// rewriting. With Pebble's 2 MiB level-0 target each such flush left
	// several tables, and a compaction of several tables rewrites them all.
	// The levels below keep Pebble's targets (4 MiB at the base level,
	// doubling per level), so compactions there stay short.
	po.TargetFileSizes[0] = l0TargetFileSize(memBytes)
	for i := 1; i < len(po.TargetFileSizes); i++ {
		po.TargetFileSizes[i] = baseTargetFileSize << (i - 1)
	}
	if d := o.WALMinSyncInterval; d > 0 {
		po.WALMinSyncInterval = func() time.Duration { return d }
	}
	for i := range po.Levels {
		l := &po.Levels[i]
		// Bloom filters on every level (Pebble's default is none) make point
		// Gets for missing keys cheap: ~1% false positives at 10 bits/key,
		// except in the spans SetUnfilteredSpans names.
		l.FilterPolicy = spanFilterPolicy{FilterPolicy: bloom.FilterPolicy(bitsPerKey), s: s}
		l.FilterType = pebble.TableFilter
		l.BlockSize = 16 << 10
		l.IndexBlockSize = 256 << 10
	}
	return po
}

// baseTargetFileSize is the target size of the tables compactions write
// to the base level (Pebble's default); each level below doubles it.
const baseTargetFileSize = 4 << 20

// l0TargetFileSize is the target size of a flushed table: a whole
// memtable's worth, so that a flush ends its tables only at span
// boundaries (see pebbleOptions). A flushed table is never larger than the
// memtable it comes from.
func l0TargetFileSize(memTableBytes int64) int64 {
	return max(memTableBytes, baseTargetFileSize)
}

// Close closes the store. It waits for in-flight operations on other
// goroutines, flushes and syncs the WAL (so a clean Close loses nothing, even
// with Sync=false) and releases the directory lock. All iterators and
// snapshots must be closed first; otherwise Pebble reports them as leaked in
// the returned error. Calling Close again returns ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	s.closed.Store(true)
	defer s.release()
	s.disk.close()
	ierr := s.closeIndex()
	if err := errors.Join(ierr, s.db.Close()); err != nil {
		return fmt.Errorf("store: close %s: %w", s.dir, err)
	}
	return nil
}

// Shared is false: one process holds the directory.
func (s *Store) Shared() bool { return false }

// Watch returns at once: every change is this process's own.
func (s *Store) Watch(context.Context, []byte, func()) {}

// Dir returns the directory the store was opened on.
func (s *Store) Dir() string { return s.dir }

// SyncWrites reports whether the store was opened with Options.Sync.
func (s *Store) SyncWrites() bool { return s.sync }

// Flush flushes the memtables to sstables and waits for the flush to finish.
// It is not needed for durability (the WAL provides that); it is useful
// before measuring on-disk size or to bound WAL replay time. On a full
// disk it returns store.ErrDiskFull instead of waiting for space.
func (s *Store) Flush() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	if err := s.flushDB(s.db); err != nil {
		return fmt.Errorf("store: flush: %w", err)
	}
	if s.index != nil {
		s.index.settle()
		if err := s.flushDB(s.index.db); err != nil {
			return fmt.Errorf("store: flush the index instance: %w", err)
		}
	}
	return nil
}

// Compact flushes the memtables and compacts the whole key space down to
// the bottom level, waiting until done (or until ctx ends). After a bulk
// load it turns many overlapping sstables into one sorted run, so a point
// read consults one file instead of one per level, and reads stop
// competing with background compactions. Reads and writes may continue
// meanwhile.
func (s *Store) Compact(ctx context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	if err := s.flushDB(s.db); err != nil {
		return fmt.Errorf("store: compact: %w", err)
	}
	if err := s.db.Compact(ctx, s.layout.lower, s.layout.upper, false); err != nil {
		return fmt.Errorf("store: compact: %w", err)
	}
	if ix := s.index; ix != nil {
		ix.settle()
		if err := s.flushDB(ix.db); err != nil {
			return fmt.Errorf("store: compact: %w", err)
		}
		if err := ix.db.Compact(ctx, s.layout.indexLower, s.layout.indexUpper, false); err != nil {
			return fmt.Errorf("store: compact the index instance: %w", err)
		}
	}
	return nil
}

// EstimateSize returns an estimate of the on-disk bytes used by keys in
// [start, end] (Pebble's DB.EstimateDiskUsage). It is meant for splitting
// scans into similarly sized pieces. Data still in memtables (not yet
// flushed) is not counted.
func (s *Store) EstimateSize(start, end []byte) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return 0, ErrClosed
	}
	n, err := s.db.EstimateDiskUsage(start, end)
	if err != nil {
		return 0, fmt.Errorf("store: estimate size: %w", err)
	}
	if lo, hi, ok := s.layout.indexPart(start, end); ok && s.index != nil {
		m, err := s.index.db.EstimateDiskUsage(lo, hi)
		if err != nil {
			return 0, fmt.Errorf("store: estimate size: %w", err)
		}
		n += m
	}
	return n, nil
}

// Checkpoint writes a consistent copy of the store into dir, which must
// not exist: tables are hard-linked where the file system allows (copied
// otherwise), the write-ahead log is flushed and copied, so the copy holds
// every batch applied before the call. The copy opens as a store of its
// own (it holds the MarkerFile too).
func (s *Store) Checkpoint(dir string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return ErrClosed
	}
	main := func() error {
		if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
			return fmt.Errorf("store: checkpoint: %w", err)
		}
		return writeMarker(s.fs, dir)
	}
	if s.index == nil {
		return main()
	}
	return s.checkpointIndex(dir, main)
}
