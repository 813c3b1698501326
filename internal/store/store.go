// Package store is Protobase's storage layer and the only package that imports
// Pebble. Everything above it (the engine) sees only this package's types.
//
// The engine depends on the storage contract (KV, View, ReadSnapshot,
// Iterator, WriteBatch; guarantees in contract.go): atomic batches with
// preconditions, snapshot reads at one version, ordered iteration both
// ways, point lookups through an iterator, split points and durability.
// Store implements it on one machine; internal/store/etcd implements it
// over an etcd cluster shared by several servers.
//
// It owns:
//   - opening and closing the Pebble directory with tuned options (newest
//     on-disk format, bloom filters on every level, L0 and memtable sizing for
//     ingest-heavy use, tables cut at the key space's span boundaries and
//     one flushed table per span, Pebble's own log through slog);
//   - the index instance (tier.go): a second Pebble instance in Dir/index
//     holding the index entries with level 0 merged in tiers, kept in step
//     with the main one through a journal in the main instance's log;
//   - atomic write batches (Batch) and their durability (fsync with group
//     commit);
//   - reads: point gets, bounded iterators and consistent snapshots;
//   - range deletion (Batch.DeleteRange);
//   - a storage size/metrics summary (Metrics, EstimateSize);
//   - the filesystem seam (Options.FS, MemFS) on which tests cut the power,
//     dropping every byte that was not synced.
//
// # Durability contract
//
// Writing is split into two steps so that callers can group-commit:
//
//  1. Store.Apply makes a batch visible atomically: once Apply returns, every
//     reader (Get, new iterators, new snapshots) sees all of the batch or, before
//     that point, none of it. Apply does not wait for the fsync.
//  2. Batch.Wait blocks until the batch is durable in the write-ahead log
//     (fsynced) and reports the sync error, if any.
//
// Store.Commit is Apply followed by Wait. Open syncs the entry of a
// directory it creates, so that a power cut right after Open does not lose
// the store with its directory.
//
// Invariants the caller can rely on:
//
//   - Visible before durable. A batch passed to Apply is visible to readers
//     before it is durable. A reader can therefore observe data that is lost if
//     the process or machine crashes before the fsync completes. Do not
//     acknowledge a write to a client (or expose it where that matters) until
//     Wait has returned nil.
//   - Durability is promised only after Wait returns nil (with Options.Sync).
//   - Prefix durability. Batches are appended to a single WAL in commit order,
//     and recovery replays a prefix of that WAL, so a later batch is never
//     durable without every earlier one. Batches also become visible in commit
//     order. A successful Wait for batch N therefore implies every batch applied
//     before N is durable too.
//   - Group commit. Because Apply does not fsync, a caller can hold its own
//     lock only around Apply, release it, then call Wait; concurrent writers'
//     batches are then covered by a shared fsync. Pebble starts the next fsync
//     as soon as the previous one finishes, so batches share an fsync only
//     when they arrive while one is in flight: with 2 committers of 1-record
//     batches each fsync typically still covers one batch, with 8 about four
//     (see Options.WALMinSyncInterval).
//   - An empty batch is not written to the WAL: its Apply and Wait succeed
//     at once and say nothing about earlier batches.
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
package store

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

	"github.com/protobase/protobase/internal/keyspace"
)

// Sizes used when Options.CacheBytes or MemTableBytes is 0 and the
// memory available is unknown (see DefaultSizes).
const (
	// DefaultCacheBytes is the block cache size then.
	DefaultCacheBytes int64 = 256 << 20
	// DefaultMemTableBytes is the memtable size then.
	DefaultMemTableBytes int64 = 64 << 20
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
	// FS, when set, holds Dir instead of the operating system's filesystem:
	// tests cut the power on it (see MemFS). Nil means the real disk.
	FS *MemFS
	// Sync: when true (the default the caller passes), Commit returns only
	// after the batch is fsynced, and Wait waits for the fsync.
	// False risks losing recently acknowledged batches on power loss or
	// kill -9 (not corruption).
	Sync bool
	// CacheBytes is the block cache size; 0 means the default for the
	// machine's memory (DefaultSizes(Memory())).
	CacheBytes int64
	// MemTableBytes is the size of one memtable; 0 means the default for
	// the machine's memory (DefaultSizes(Memory())). Up to
	// MemTableStopWrites memtables may exist before writes stall. The
	// index instance (tier.go) has memtables of half this size, as many,
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
	// singleInstance creates a new store without an index instance, as
	// stores were before it: tests open one to check that such stores
	// keep working.
	singleInstance bool
	// ReadOnly opens an existing store without write access. Open fails if
	// Dir does not exist; Apply, Commit and Flush return ErrReadOnly.
	ReadOnly bool
	// Logger receives Pebble's own messages (nil discards them): its
	// informational ones (flushes, compactions) at debug level, its errors
	// at error level. A fatal message is logged (to stderr when Logger
	// would drop it) and terminates the process, as Pebble cannot continue
	// after, for example, a failed WAL write.
	Logger *slog.Logger
}

// Store is an open Pebble database. It is safe for concurrent use by multiple
// goroutines. Once Close has been called, methods that can fail return
// ErrClosed instead of panicking (Metrics returns the zero value); Close
// itself waits for in-flight Get, Apply, Flush and iterator or snapshot
// creation calls to finish.
type Store struct {
	db *pebble.DB
	// tier is the index instance (tier.go); nil for a store that keeps its
	// index entries in db. Immutable after Open.
	tier     *tier
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
}

// Open opens (creating if needed) the store in o.Dir.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("store: open: Options.Dir is empty")
	}
	fs := vfs.Default
	if o.FS != nil {
		fs = o.FS.fs
	}
	if o.ReadOnly {
		fi, err := fs.Stat(o.Dir)
		if err != nil {
			return nil, fmt.Errorf("store: open %s read-only: %w", o.Dir, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("store: open %s read-only: not a directory", o.Dir)
		}
	} else if err := createDir(fs, o.Dir); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", o.Dir, err)
	}
	release, err := claimDir(o.FS, o.Dir)
	if err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{dir: o.Dir, sync: o.Sync, readOnly: o.ReadOnly, release: release, fs: fs, logger: logger}
	po := s.pebbleOptions(o)
	if o.FS != nil {
		po.FS = fs // nil leaves Pebble's default: the disk, health-checked
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
	if err := s.openTier(o, fs, po); err != nil {
		_ = db.Close()
		release()
		return nil, err
	}
	return s, nil
}

// pebbleOptions translates Options into tuned Pebble options.
func (s *Store) pebbleOptions(o Options) *pebble.Options {
	cacheBytes, memBytes := o.CacheBytes, o.MemTableBytes
	if cacheBytes <= 0 || memBytes <= 0 {
		c, m := DefaultSizes(Memory())
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
		// One cache for both instances (tier.go); Open drops this
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
		EventListener: s.stallListener(),
	}
	// End every flushed or compacted table at the key space's span
	// boundaries (the change log, each record type, each index): a table
	// that reached from the newest log entries into the records, or from
	// one type's newest keys into the next type, overlapped every later
	// flush of both, so their keys were rewritten at each level on the way
	// down instead of moved there.
	po.Experimental.SpanPolicyFunc = func(start []byte) (pebble.SpanPolicy, []byte, error) {
		return pebble.SpanPolicy{}, keyspace.SpanEnd(start), nil
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

// stallListener counts Pebble's write stalls and the time they last, for
// the store's metrics, and reports damaged tables.
func (s *Store) stallListener() *pebble.EventListener {
	return &pebble.EventListener{
		// Without a listener Pebble ends the process on a damaged
		// block (its logger's Fatalf): one read of one bad table, such
		// as a watcher reaching a damaged change-log entry or check
		// reading it, would stop the server, again at every restart.
		// The read fails with the corruption error instead, naming the
		// table; the rest of the store goes on serving.
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			s.logger.Error("storage: a table is damaged; reads of its keys fail (restore from a backup)",
				"file", info.Path, "bounds", info.Bounds.String(), "err", info.Details)
		},
		WriteStallBegin: func(pebble.WriteStallBeginInfo) {
			s.stalls.Add(1)
			s.stallStart.Store(time.Now().UnixNano())
		},
		WriteStallEnd: func() {
			if start := s.stallStart.Swap(0); start != 0 {
				s.stallNanos.Add(time.Now().UnixNano() - start)
			}
		},
	}
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
	terr := s.closeTier()
	if err := errors.Join(terr, s.db.Close()); err != nil {
		return fmt.Errorf("store: close %s: %w", s.dir, err)
	}
	return nil
}

// Dir returns the directory the store was opened on.
func (s *Store) Dir() string { return s.dir }

// SyncWrites reports whether the store was opened with Options.Sync.
func (s *Store) SyncWrites() bool { return s.sync }

// Flush flushes the memtables to sstables and waits for the flush to finish.
// It is not needed for durability (the WAL provides that); it is useful
// before measuring on-disk size or to bound WAL replay time.
func (s *Store) Flush() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("store: flush: %w", err)
	}
	if s.tier != nil {
		if err := s.tier.db.Flush(); err != nil {
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
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("store: compact: %w", err)
	}
	start, end := keyspace.Bounds()
	if err := s.db.Compact(ctx, start, end, false); err != nil {
		return fmt.Errorf("store: compact: %w", err)
	}
	if t := s.tier; t != nil {
		if err := t.db.Flush(); err != nil {
			return fmt.Errorf("store: compact: %w", err)
		}
		if err := t.db.Compact(ctx, indexLower, indexUpper, false); err != nil {
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
	if lo, hi, ok := indexPart(start, end); ok && s.tier != nil {
		m, err := s.tier.db.EstimateDiskUsage(lo, hi)
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
// own.
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
		return nil
	}
	if s.tier == nil {
		return main()
	}
	return s.checkpointTier(dir, main)
}
