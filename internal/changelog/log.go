// Package changelog owns the change log of a store that is not Shared
// (Pebble): the history of write batches that Watch reads.
//
// Every write batch that commits a sequence number also writes one log
// entry under keyspace.LogPrefix, in the same storage batch, so a batch
// and its changes become visible and durable together. Watch reads the
// log; it never sees a fan-out of batches in memory.
//
// Entry value (version 1):
//
//	version(1) | unix time ns (8 BE) | log bytes written before it (8 BE) |
//	per change: op(1) | type id (uvarint) | new record (uvarint length, bytes) |
//	            old record (uvarint length, bytes)
//
// op is what happened to the key (Insert, Update, Remove): an upsert is
// logged as the insert or update it turned out to be. A remove has no new
// record, an insert no old one. The primary key is not stored: the record
// (the old one for a remove) holds it.
//
// An entry larger than PartBytes is stored in parts (parts.go): under the
// commit's key a header (version 2) naming the entry's time, the log
// bytes before it, its changes' bytes and its parts, and under the part
// keys (keyspace.AppendLogPartKey) the changes' bytes cut into pieces of
// PartBytes, where a change may straddle two parts. No stored value is
// then larger than PartBytes: Pebble keeps a value in one block, and
// reading a damaged block costs Pebble a search for a flipped bit that
// grows with the block (about 3 s for 256 KiB on a current core, a
// quarter of an hour for 80 MB), which no context stops. Smaller entries
// keep the one-value form, which is also what stores written by earlier
// versions hold for every entry: both are read.
//
// The time is the log's clock (clock.go), which never goes back. It is
// what trimming by age reads.
//
// Invariant: the log holds one contiguous run of commits ending at the
// last commit (or nothing). Open drops entries left before a gap (the log
// was off for a while), and trimming deletes a prefix.
//
// What the package owns besides the format: the watermarks watchers read
// up to (the last commit durable, and the last applied while a sync is
// due), the tail of the newest entries kept in memory for watchers
// (tail.go), trimming by age and bytes (trim.go), opening the log at a
// start (Open) and checking it (Check), and reading entries from a
// commit on (Reader). The engine's writer calls Builder, Put, Applied and
// Synced; it touches none of this state itself.
//
// Lock order: Log.syncMu, then the engine's write lock (Options.SyncApplied
// takes it; Put and Applied are called under it), then one of the tail's
// mu, a watermark's mu or the clock's mu (never two of them at once).
package changelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// Options configure a Log.
type Options struct {
	// Retention, when positive on a store that is not Shared, turns the
	// log on: write batches write entries, and entries older than this
	// (on the log's clock) are trimmed. Otherwise the log is off, and
	// Open drops the entries left in the store.
	Retention time.Duration
	// RetentionBytes, when positive, also trims the oldest entries beyond
	// this many bytes.
	RetentionBytes int64
	// TailBytes bounds the newest entries kept in memory while readers
	// run (tail.go; 0: DefaultTailBytes, negative: none).
	TailBytes int64
	// Clock is the wall clock the log's time follows (nil: time.Now).
	Clock func() time.Time
	// SyncApplied makes every batch applied so far durable and returns
	// the last of them (0 when none waits for a sync). It is the
	// writer's: the engine writes its commit sequence again with a sync,
	// under its write lock. Sync calls it.
	SyncApplied func() (uint64, error)
	// Logger receives the trimming's failures; nil discards.
	Logger *slog.Logger
}

// Log is the change log of one store. It is safe for concurrent use,
// with the writer's calls (Put, Applied) serialized by the caller.
type Log struct {
	st    store.KV
	opts  Options
	on    bool // immutable after Open
	clock *clock

	// bytes is the log's bytes written before the next entry (each entry
	// records it: trimming by bytes reads it). Put reads it and Applied
	// adds to it; both run under the engine's write lock, one batch at a
	// time in commit order, so it needs no lock of its own.
	bytes uint64

	// durable is the last commit known durable: what readers read up to.
	// visible is the last commit applied, on a store whose writes wait
	// for a sync: a reader seeing it beyond durable knows a batch waits
	// for its writer's sync (see Sync).
	durable *Watermark
	visible *Watermark

	// syncMu serializes Sync.
	syncMu sync.Mutex

	tail tail
}

// Open opens the log of st, whose last commit is last. On a store that
// is not Shared it makes the log one contiguous run ending at last, as
// the invariant says: with the log off every entry goes, and with it on
// the entries go when the newest is not last (the log was off for a
// while, so they end before a gap). It starts the log's byte count from
// the newest entry kept, and the log's clock no earlier than its time.
// Call it before any writer. A Shared store (etcd) keeps no log: its
// own feed serves Watch.
func Open(st store.KV, last uint64, opts Options) (*Log, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{st: st, opts: opts, on: opts.Retention > 0 && !st.Shared(), clock: newClock(opts.Clock),
		durable: newWatermark(last), visible: newWatermark(last)}
	if !st.Shared() {
		if err := l.open(last); err != nil {
			return nil, err
		}
	}
	if l.on {
		l.tail.max = tailBytes(opts.TailBytes)
	}
	return l, nil
}

func (l *Log) open(last uint64) error {
	it, err := l.st.NewIterator(logStart, logEnd)
	if err != nil {
		return fmt.Errorf("open change log: %w", err)
	}
	c, h, found, err := lastEntry(it)
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("open change log: %w", err)
	}
	if !found {
		return nil
	}
	if l.on && c == last {
		l.bytes = h.cum + h.stored
		l.clock.startAt(h.at)
		return nil
	}
	b := l.st.NewWriteBatch()
	defer b.Close()
	b.DeleteRange(logStart, logEnd)
	if err := l.st.ApplyBatch(b); err != nil {
		return fmt.Errorf("drop change log: %w", err)
	}
	return b.Wait()
}

// On reports whether write batches write entries.
func (l *Log) On() bool { return l.on }

// Put completes the entry b built for the batch of commit seq and adds it
// to the storage batch wb: as one value, or in parts when larger than
// PartBytes. Called under the engine's write lock once the commit is
// numbered, before the batch is applied.
func (l *Log) Put(wb store.WriteBatch, seq uint64, b *Builder) {
	binary.BigEndian.PutUint64(b.buf[1:9], uint64(l.clock.now()))
	binary.BigEndian.PutUint64(b.buf[9:17], l.bytes)
	b.key = keyspace.AppendLogKey(b.key[:0], seq)
	if len(b.buf) > PartBytes {
		b.putParts(wb, seq)
		return
	}
	wb.Set(b.key, b.buf)
	b.stored = uint64(len(b.key) + len(b.buf))
}

// Applied records that the batch of commit seq, whose entry b Put added,
// is applied (visible): the log's bytes grow by the entry, the tail keeps
// it (taking b's buffer, and giving b another for its next entry), and a
// watermark moves: on a store that does not sync, the durable one
// (visible is durable), else the visible one, until Synced. Called under
// the engine's write lock, in commit order.
func (l *Log) Applied(seq uint64, b *Builder) {
	l.bytes += b.stored
	b.buf = l.tail.add(seq, b.buf)
	if !l.st.SyncWrites() {
		l.durable.advance(seq)
	} else {
		l.visible.advance(seq)
	}
}

// Synced records that every batch up to commit seq is durable: a
// writer's sync returned, and the WAL is synced in order.
func (l *Log) Synced(seq uint64) { l.durable.advance(seq) }

// Durable is the last commit known durable, what readers may read up to.
func (l *Log) Durable() *Watermark { return l.durable }

// Visible is the last commit applied on a store whose writes wait for a
// sync; on one that does not it stays where Open left it.
func (l *Log) Visible() *Watermark { return l.visible }

// Sync makes every applied batch durable and raises the durable
// watermark to it. Readers call it when a batch stays applied but not
// known durable for a while: its writer has not waited for its sync (a
// Write stream that asked for no acknowledgement and has gone quiet), and
// without this the batch would reach them only when some writer next
// waits. The engine's hook (Options.SyncApplied) writes the commit
// sequence again, unchanged, with a sync: the WAL is synced in order, so
// every batch before it is durable too.
func (l *Log) Sync() error {
	if l.opts.SyncApplied == nil {
		return nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	seq, err := l.opts.SyncApplied()
	if err != nil {
		return fmt.Errorf("sync the change log: %w", err)
	}
	l.durable.advance(seq)
	return nil
}

// First returns the oldest commit the log holds; ok is false when it
// holds none. Its errors are the store's.
func (l *Log) First() (c uint64, ok bool, err error) {
	it, err := l.st.NewIterator(logStart, logEnd)
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	if !it.First() {
		return 0, false, it.Error()
	}
	c, _, ok = entryCommit(it.Key())
	return c, ok, nil
}

// ErrGap reports that the log does not hold a commit a reader needs:
// trimmed by the retention, or written while the log was off.
var ErrGap = errors.New("the change log no longer holds the commit")

// EntryError reports an entry that does not read: malformed, a part
// missing, or a key in the log that is no entry's.
type EntryError struct {
	Commit uint64
	Err    error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("change log entry of commit %d: %v", e.Commit, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// Watermark is a commit that only rises, with a broadcast to the readers
// waiting for it to move.
type Watermark struct {
	n  atomic.Uint64 // read without mu, written under it
	mu struct {
		sync.Mutex
		// ch is closed and replaced on every advance; mu also
		// serializes advances.
		ch chan struct{}
	}
}

func newWatermark(n uint64) *Watermark {
	w := &Watermark{}
	w.mu.ch = make(chan struct{})
	w.n.Store(n)
	return w
}

// Value returns the watermark.
func (w *Watermark) Value() uint64 { return w.n.Load() }

// Load returns the watermark and a channel closed when it next moves.
func (w *Watermark) Load() (uint64, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n.Load(), w.mu.ch
}

// advance raises the watermark to n (never lowers it) and wakes readers.
func (w *Watermark) advance(n uint64) {
	if n <= w.n.Load() {
		return
	}
	w.mu.Lock()
	if n > w.n.Load() {
		w.n.Store(n)
		close(w.mu.ch)
		w.mu.ch = make(chan struct{})
	}
	w.mu.Unlock()
}

var (
	logStart = []byte(keyspace.LogPrefix)
	logEnd   = keyspace.PrefixEnd([]byte(keyspace.LogPrefix))
)

// logKey is the key of commit c's entry.
func logKey(c uint64) []byte { return keyspace.AppendLogKey(nil, c) }
