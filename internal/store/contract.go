// Package store is Protobase's storage contract: the interfaces the engine
// depends on (KV, View, ReadSnapshot, Iterator, WriteBatch, and the
// capabilities Locker, Feed and SpanFilterer), the errors every
// implementation returns, and the guarantees each gives. It holds no
// implementation and imports no storage engine, so the engine, which sees
// only this package, links none:
//
//   - internal/store/pebble implements the contract on Pebble, embedded in
//     one process (the only importer of Pebble);
//   - internal/store/etcd implements it over an etcd cluster several
//     servers share;
//   - internal/store/storetest is the conformance suite, which this
//     package's tests run against both (conformance_test.go).
//
// # Durability contract
//
// Writing is split into two steps so that callers can group-commit:
//
//  1. KV.ApplyBatch makes a batch visible atomically: once it returns,
//     every reader (Get, new iterators, new snapshots) sees all of the
//     batch or, before that point, none of it. It need not wait for the
//     batch to be durable.
//  2. WriteBatch.Wait blocks until the batch is durable and reports the
//     error that kept it from being, if any.
//
// Invariants the caller can rely on:
//
//   - Visible before durable. A batch passed to ApplyBatch may be visible
//     to readers before it is durable (Pebble: before its fsync). A reader
//     can therefore observe data that is lost if the process or machine
//     crashes before the batch is durable. Do not acknowledge a write to a
//     client (or expose it where that matters) until Wait has returned nil.
//   - Durability is promised only after Wait returns nil, on a store whose
//     SyncWrites is true.
//   - Prefix durability. Batches are made durable in commit order, so a
//     later batch is never durable without every earlier one. Batches also
//     become visible in commit order. A successful Wait for batch N
//     therefore implies every batch applied before N is durable too.
//   - Group commit. Because ApplyBatch does not wait for durability, a
//     caller can hold its own lock only around ApplyBatch, release it,
//     then call Wait; concurrent writers' batches are then covered by a
//     shared sync (Pebble: one fsync of its write-ahead log; etcd commits
//     each batch durably before ApplyBatch returns, and Wait returns at
//     once).
//   - An empty batch writes nothing: its Wait succeeds at once and says
//     nothing about earlier batches. Its ApplyBatch succeeds at once too,
//     but for its preconditions (Read, ReadAbsent, Expect), which a store
//     that enforces them still checks (ErrConflict): a batch of
//     preconditions alone is a check of them at one instant.
//
// A store whose SyncWrites is false (Pebble opened without Options.Sync)
// does not wait for durability: Wait returns immediately, and recently
// acknowledged batches may be lost on power loss or kill -9. The store is
// never corrupted and the prefix property still holds: what survives is
// always a prefix of the commit order.
package store

import (
	"context"
	"errors"
	"strconv"
)

// The storage contract. The engine depends on these interfaces only; the
// Pebble store in internal/store/pebble (one process, embedded) implements
// them, and so does the etcd store in internal/store/etcd (several
// processes sharing one cluster).
//
// Guarantees every implementation gives:
//
//   - Atomic batches. ApplyBatch makes all of a WriteBatch visible or none
//     of it: no reader ever sees part of a batch, before or after a crash.
//   - Preconditions. The reads a writer makes through WriteBatch.Read and
//     WriteBatch.ReadAbsent are the batch's preconditions: the batch applies
//     only if each key read is still absent (it was absent) or unchanged
//     since the version read (it was present), and each range read empty is
//     still empty. Otherwise ApplyBatch applies nothing and returns an error
//     matching ErrConflict; the writer re-reads, re-checks and tries again.
//   - Durability. Once WriteBatch.Wait returns nil after ApplyBatch, the
//     batch survives a crash (of the process; for etcd, of a minority of
//     members). A later batch is never durable without every batch that was
//     visible before it.
//   - Snapshots. A ReadSnapshot reads one version of the whole store: every
//     Get and iterator on it sees the same set of applied batches.
//   - Linearizable reads. A read that starts after ApplyBatch returned, on
//     any process sharing the store, sees the batch.
//   - Ordered iteration in both directions over [lower, upper) in byte
//     order of the keys; point lookups through an iterator (Lookup) read at
//     the iterator's version.
//   - Split points (SplitKeys) are hints only: any set of keys inside the
//     range is correct, none (one part) included.
//   - Limits. A batch beyond what the store can apply in one atomic step is
//     refused whole with an error matching ErrLimit whose message names the
//     limit and how to raise it; nothing of it is applied.
//   - A store that does not answer. A read that fails because the store
//     could not be reached or did not answer in time (no connection, no
//     leader, past the request timeout) fails with an error matching
//     ErrUnavailable, and so does a batch the store never received or
//     refused before applying anything. A batch that was sent and got no
//     answer fails with an error matching ErrOutcomeUnknown: it may have
//     been applied, or may still be. ApplyBatch returns no other error
//     for a batch that was sent and not answered, so a caller never
//     reports a definite failure for a batch that may have been applied.
//   - A full disk. A store that cannot write for want of space refuses
//     batches whole with an error matching ErrDiskFull, without waiting,
//     until space is freed; reads go on.
//   - Record versions. Every record (on Pebble the keys of the layout's
//     record span; on etcd every key) has a version: a number that
//     changes with every write of the record and grows over time, the
//     same number the change feed gives the batch that wrote it (Pebble:
//     the caller's commit sequence, told the batch with
//     WriteBatch.Stamp; etcd: the key's mod_revision). A key that is
//     absent has version 0, and a present record never does.
//     View.GetVersioned and Iterator.Version read it at the view's
//     version, beside the value, which stays the bytes the caller wrote.
//   - A version that is gone. A snapshot whose version the store no longer
//     keeps (etcd compaction) fails its reads with an error matching
//     ErrCompacted; it never returns rows of another version.
//
// Pebble checks preconditions without doing anything: its Read is a plain
// read and ApplyBatch never returns ErrConflict. That is sound because a
// Pebble directory is held by one Store in one process (its claimDir) and the
// engine makes its precondition reads and ApplyBatch under one write lock
// (Engine.writeMu): no other writer can apply anything between a read and
// the apply that depends on it, so every precondition holds by construction.
// Across processes there is no such lock, which is why etcd carries the
// preconditions into its transaction.
var (
	// ErrConflict is returned by ApplyBatch when a precondition of the
	// batch failed: another writer changed a key the batch read.
	ErrConflict = errors.New("store: a key the batch read has changed since")
	// ErrLimit is returned by ApplyBatch for a batch larger than the store
	// accepts in one atomic step (see the error's message).
	ErrLimit = errors.New("store: batch exceeds a limit of the store")
	// ErrCompacted is returned by reads at a version the store no longer
	// keeps.
	ErrCompacted = errors.New("store: the version read has been compacted")
	// ErrUnavailable is returned when the store could not be reached or
	// did not answer in time and nothing was changed: by reads, and by
	// ApplyBatch for a batch the store never received or refused before
	// applying it. Retrying once the store answers is safe.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrOutcomeUnknown is returned by ApplyBatch when the batch was sent
	// and no answer came back (past the request timeout, a lost
	// connection, a leader change): it may have been applied. Read its
	// keys back before retrying it.
	ErrOutcomeUnknown = errors.New("store: outcome unknown")
	// ErrDiskFull is returned by ApplyBatch (and Flush) while the disk
	// that holds the store has no space left for its tables: the batch is
	// refused whole, at once, reads go on, and batches are taken again
	// once space is freed.
	ErrDiskFull = errors.New("the disk holding the data directory is full (no space left on device): writes are refused until space is freed")
	// ErrBatchNotApplied is returned by WriteBatch.Wait for a batch that
	// was never applied.
	ErrBatchNotApplied = errors.New("store: Wait on a batch that was not applied")
)

// EntryGroupSuffix is how many last bytes of a key written with
// WriteBatch.SetEntry may tell it apart from the others of its group: a
// group holds up to 65,536 keys.
const EntryGroupSuffix = 2

// EntryGrouper is implemented by a store that may keep the keys written
// with WriteBatch.SetEntry in groups (Pebble): GroupsEntries reports
// whether it does, in which case a point read does not find them.
type EntryGrouper interface {
	GroupsEntries() bool
}

// KV is a store: the latest state, snapshots and atomic batches.
type KV interface {
	View
	// Shared reports whether other processes may write the store (etcd):
	// then a process learns of their changes only by reading, versions and
	// Watch, and batch preconditions are enforced by the store.
	Shared() bool
	// Watch calls fn after every change, by any process, of a key that
	// starts with prefix, until ctx ends; then it returns. Changes that
	// come close together may share one call. A store that is not Shared
	// returns at once: every change is its own process's.
	Watch(ctx context.Context, prefix []byte, fn func())
	// OpenSnapshot returns a view of one version of the store, at the
	// latest applied batch or later. It must be closed.
	OpenSnapshot() (ReadSnapshot, error)
	// NewWriteBatch returns an empty batch of this store; Close it.
	NewWriteBatch() WriteBatch
	// ApplyBatch makes b visible atomically if its preconditions hold
	// (ErrConflict otherwise). Durability may lag: see WriteBatch.Wait.
	ApplyBatch(b WriteBatch) error
	// SplitKeys returns up to n-1 keys inside (start, end) that cut the
	// range into parts of roughly equal size.
	SplitKeys(start, end []byte, n int) ([][]byte, error)
	// SyncWrites reports whether Wait waits for durability.
	SyncWrites() bool
	// Flush and Compact are maintenance; a store without them returns nil.
	Flush() error
	Compact(ctx context.Context) error
	Close() error
}

// View reads one state: the latest (KV) or a fixed version (ReadSnapshot).
type View interface {
	// Get appends the value of key to dst[:0]; found is false when the
	// key is absent. The result is owned by the caller.
	Get(key, dst []byte) (val []byte, found bool, err error)
	// GetLikelyMissing is Get for keys that are usually absent.
	GetLikelyMissing(key, dst []byte) (val []byte, found bool, err error)
	// GetVersioned is Get that also returns the key's version: a number
	// that changes with every write of the key, 0 when absent (see Record
	// versions above). A Shared store versions every key; one that is not
	// versions the records only, and returns 0 for any other key: its one
	// process sees every change it makes to those.
	GetVersioned(key, dst []byte) (val []byte, version uint64, found bool, err error)
	// NewIterator returns an unpositioned iterator over [lower, upper)
	// (nil: unbounded; an empty upper bound holds nothing) at one version.
	// It must be closed.
	NewIterator(lower, upper []byte) (Iterator, error)
}

// Locker is implemented by Shared stores: a lock named by a key, held by
// one process at a time and released when the process dies (its lease
// lapses). Lock blocks until the lock is held or ctx ends; the returned
// function releases it.
type Locker interface {
	Lock(ctx context.Context, key []byte) (release func(), err error)
}

// Checker is implemented by Shared stores: CheckBatch applies none of b's
// writes and reports whether every precondition read through b still
// holds, all at one moment (ErrConflict when one does not). A batch
// refused for what it read proves so that its reads, taken at different
// moments, were true together. b must be Reset before reuse.
type Checker interface {
	CheckBatch(b WriteBatch) error
}

// ReadSnapshot is a View of one version; Close releases it.
type ReadSnapshot interface {
	View
	Close() error
}

// Iterator walks a key range at one version, in either direction. It is
// not safe for concurrent use. Positioning methods report Valid(); Key
// and Value are valid until the next positioning call. Lookup is a point
// read at the iterator's version that leaves it positioned arbitrarily;
// many Lookups through one iterator are the batched point read.
type Iterator interface {
	First() bool
	Last() bool
	SeekGE(key []byte) bool
	SeekLT(key []byte) bool
	Next() bool
	Prev() bool
	Valid() bool
	Key() []byte
	Value() []byte
	SetBounds(lower, upper []byte)
	Lookup(key, dst []byte) ([]byte, bool, error)
	// Version returns the record version of the entry the iterator is
	// on, or after a Lookup that found its key, of that key's entry: the
	// version beside the bytes Value or Lookup returned. Its cost is a
	// few loads; it reads nothing more from the store.
	Version() uint64
	// Prefetch reads keys at the iterator's version so that the Lookups
	// of them that follow cost no round trip: the batched point read of a
	// store whose reads cross a network. A store that reads locally does
	// nothing.
	Prefetch(keys [][]byte) error
	Error() error
	Close() error
}

// WriteBatch is an atomic group of writes with the preconditions read
// through it. It is not safe for concurrent use. After ApplyBatch it must
// be Reset before reuse; Reset also forgets the preconditions.
type WriteBatch interface {
	Set(key, value []byte)
	Delete(key []byte)
	DeleteRange(start, end []byte)
	// SetEntry sets key with an empty value, and DeleteEntry deletes such
	// a key, as Set and Delete do, telling the store that it may keep the
	// key with its neighbours that differ from it only in their last
	// EntryGroupSuffix bytes (Pebble keeps them in one key, index.go).
	// The caller writes with them only keys of which no two lose their
	// order, nor one becomes a proper prefix of another's, when cut so,
	// and reads such keys by iteration only: a point read (Get, Lookup,
	// Read) of a key SetEntry wrote may miss it. A DeleteRange deletes
	// them only where its bounds end no group, as bounds that are the
	// prefix and prefix end of an index do.
	SetEntry(key []byte)
	DeleteEntry(key []byte)
	// SetEntries is SetEntry of every key group+s for s in suffixes, the
	// concatenation of distinct suffixes of EntryGroupSuffix bytes in
	// ascending order: a group's entries written at once.
	SetEntries(group, suffixes []byte)
	// Read is Get of the latest state, made a precondition of the batch.
	// likelyMissing picks the read tuned for absent keys.
	Read(key, dst []byte, likelyMissing bool) (val []byte, found bool, err error)
	// ReadAbsent reports whether no key lies in [lower, upper); when none
	// does, that the range stays empty is a precondition of the batch.
	ReadAbsent(lower, upper []byte) (bool, error)
	// Stamp sets the version the batch's record writes carry on a store
	// that does not number batches itself (Pebble): the caller's commit
	// sequence of the batch, greater than every earlier batch's. It must
	// precede the batch's first Set of a record; a store that numbers its
	// batches (etcd, whose versions are revisions) ignores it.
	Stamp(version uint64)
	// Expect makes "key is still at version" (from GetVersioned) a
	// precondition without reading the key again.
	Expect(key []byte, version uint64)
	Empty() bool
	// Wait blocks until the applied batch is durable.
	Wait() error
	// Position is the store's position of the applied batch, increasing
	// with every batch applied on the store; 0 when the store has none and
	// the caller numbers batches itself (Pebble: the engine's commit
	// sequence, written with every batch).
	Position() uint64
	Reset()
	Close()
}

// Feed is implemented by Shared stores that number every applied batch
// with a revision of their own and keep past revisions for a while (etcd).
// On such a store the engine's change feed (Watch) is the store's: the
// positions it hands out are the store's revisions, the same numbers
// WriteBatch.Position returns, and its retention is the store's compaction.
// A store that is not Shared keeps the engine's own change log instead,
// written in the same batch as the records it describes.
type Feed interface {
	// Revision returns the store's current revision: a start at "now".
	Revision(ctx context.Context) (int64, error)
	// Changes calls fn once per revision after `after` that changed a key
	// starting with prefix, in revision order, with that revision's events
	// in the order the batch wrote them, until ctx ends (it returns
	// ctx.Err()) or fn returns an error (it returns that error). A start
	// the store no longer keeps fails with an error matching ErrCompacted
	// that is a *CompactedError naming the oldest revision still kept.
	// fn may also be called with no events: a progress mark, saying that
	// every change under prefix up to rev has been given. Its rev is after
	// `after`, need not have changed anything under prefix, may repeat the
	// rev of the call before it (nothing came since) and is never below it.
	Changes(ctx context.Context, prefix []byte, after int64, fn func(rev int64, evs []Event) error) error
}

// Event is one key's change in a Feed revision. Key, Value and Prev are
// owned by the callee only for the duration of the fn call.
type Event struct {
	Key []byte
	// Value is the key's value after the change (nil for a delete).
	Value []byte
	// Prev is the value before the change (nil when the key was absent).
	Prev []byte
	// Delete is true when the change removed the key.
	Delete bool
}

// CompactedError is the ErrCompacted of a Feed start the store no longer
// keeps; Oldest is the oldest revision whose changes it still has.
type CompactedError struct {
	Oldest int64
}

func (e *CompactedError) Error() string {
	return "store: the revisions asked for are compacted; the oldest kept is " + strconv.FormatInt(e.Oldest, 10)
}

// Unwrap makes a CompactedError match ErrCompacted.
func (e *CompactedError) Unwrap() error { return ErrCompacted }

// HeaderChecker is implemented by the iterators of a store that keeps each
// record's version in a header in front of the record's stored bytes
// (Pebble; etcd's versions are revisions it keeps itself), for the
// checker: HeaderProblem says what is wrong with the header of the entry
// the iterator is on, "" when it is well formed, when the entry is not a
// record's, or when the record was stored without a header (before
// versions existed).
type HeaderChecker interface {
	HeaderProblem() string
}

// SpanFilterer is a store whose tables' bloom filters can be left out
// where no point lookup reads them (the Pebble store; see its
// Store.SetUnfilteredSpans).
type SpanFilterer interface {
	SetUnfilteredSpans(fn func(key []byte) bool)
}
