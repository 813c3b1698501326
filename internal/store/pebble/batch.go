package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/protobase/protobase/internal/store"
)

var (
	// ErrBatchApplied is returned by Apply/Commit for a batch that was already
	// applied and not Reset since.
	ErrBatchApplied = errors.New("store: batch already applied; Reset it before reuse")
	// ErrBatchClosed is returned by Apply/Commit/Wait on a closed batch.
	ErrBatchClosed = errors.New("store: batch closed")
)

// Batch is an atomic group of writes (sets, deletes, range deletes). It wraps
// a *pebble.Batch, and on a store with an index instance a second one for
// the index entries (index.go).
//
// A Batch is not safe for concurrent use. Its lifecycle is:
//
//	b := s.NewBatch()
//	b.Set(...); b.Delete(...)       // build
//	s.Apply(b)                      // visible to readers, atomically
//	b.Wait()                        // durable (Sync=true); no-op otherwise
//	b.Reset()                       // optional: reuse for the next batch
//	b.Close()                       // return it to Pebble's pool
//
// After Apply, the batch must be Reset before new operations are added
// (adding one panics) and may not be applied again until Reset. Reset and
// Close first wait for a pending fsync if the caller has not called Wait,
// because Pebble forbids releasing a batch whose sync is outstanding.
type Batch struct {
	s  *Store
	pb *pebble.Batch
	// ib holds the writes to index entries on a store with an index
	// instance; created at the first one.
	ib *pebble.Batch
	// run is the run of entry writes of one group not yet written to ib
	// (groups.go).
	run  entryRun
	mark [8]byte // ib's applied mark, written by Apply
	jkey []byte  // pb's journal key, written by Apply

	// stamp is the version of the batch's records (Stamp); records says
	// the batch sets one, which Apply refuses without a stamp.
	stamp   uint64
	records bool

	applied  bool  // Apply was called since creation/Reset
	needWait bool  // applied with ApplyNoSyncWait; SyncWait not yet called
	waitErr  error // result of the first Wait
	// indexWG is held while index batches are applied on a goroutine of
	// their own (applyIndex).
	indexWG sync.WaitGroup

	// pbWant and ibWant are the sizes of pb's and ib's contents before a
	// Reset that gave their buffers to the store's pool (batchbuf.go):
	// their next writes take one of at least that size.
	pbWant, ibWant int
}

// regrow gives pb, or ib, a buffer of at least *want bytes from the
// store's pool, before the first write after a Reset that gave its
// buffer there.
func (b *Batch) regrow(pb *pebble.Batch, want *int) {
	// An empty batch's buffer: SetRepr cannot fail.
	_ = pb.SetRepr(b.s.bufs.get(*want))
	*want = 0
}

// pool hands pb's buffer to the store's pool when Reset is about to drop
// it, and returns the size of its contents (0 if it keeps it). Pebble
// holds no reference to an applied batch's buffer: the log and the
// memtable copied it, and a batch too large for a memtable (a flushable
// batch) has no buffer left. (With WAL failover, which the store does not
// configure, the log may keep it.)
func (b *Batch) pool(pb *pebble.Batch) int {
	n := pb.Len()
	if n <= retainedBytes {
		return 0
	}
	b.s.bufs.put(pb.Repr())
	return n
}

// NewBatch returns an empty batch for s. The batch must be Closed.
func (s *Store) NewBatch() *Batch {
	return &Batch{s: s, pb: s.db.NewBatch()}
}

// NewBatchWithSize is NewBatch with room for about sizeBytes of encoded
// operations preallocated, to avoid regrowing large ingest batches.
func (s *Store) NewBatchWithSize(sizeBytes int) *Batch {
	return &Batch{s: s, pb: s.db.NewBatchWithSize(sizeBytes)}
}

func (b *Batch) mutable() {
	if b.applied {
		panic("store: batch modified after Apply; call Reset first")
	}
	if b.pb == nil {
		panic("store: batch used after Close")
	}
	if b.pbWant > 0 {
		b.regrow(b.pb, &b.pbWant)
	}
}

// Set adds key=value to the batch. Pebble copies both slices, so the caller
// may reuse its buffers as soon as Set returns.
//
// A record's value is written behind its version header (version.go), in
// place in the batch: the record's bytes are copied once, as any value's.
func (b *Batch) Set(key, value []byte) {
	b.mutable()
	if b.s.recs.has(key) {
		op := b.pb.SetDeferred(len(key), headerLen+len(value))
		copy(op.Key, key)
		putHeader(op.Value, b.stamp)
		copy(op.Value[headerLen:], value)
		_ = op.Finish()
		b.records = true
		return
	}
	pb := b.route(key)
	if pb == b.ib && b.s.groups {
		op := pb.SetDeferred(len(key), 1+len(value))
		copy(op.Key, key)
		op.Value[0] = valuePlain
		copy(op.Value[1:], value)
		_ = op.Finish()
		return
	}
	// Errors are only possible for indexed batches; ours are not indexed.
	_ = pb.Set(key, value, nil)
}

// SetEntry sets key with an empty value; in a grouped index instance it
// joins the key's group (groups.go).
func (b *Batch) SetEntry(key []byte) { b.entry(key, memberPresent) }

// SetEntries writes the group's entries as one operand, or, where the
// store keeps no groups, each on its own.
func (b *Batch) SetEntries(group, suffixes []byte) {
	b.mutable()
	if !b.s.groups || !b.s.layout.holdsGroup(group) {
		key := make([]byte, len(group)+suffixLen)
		copy(key, group)
		for i := 0; i < len(suffixes); i += suffixLen {
			copy(key[len(group):], suffixes[i:i+suffixLen])
			b.entry(key, memberPresent)
		}
		return
	}
	writeGroup(b.index(), group, suffixes)
}

// DeleteEntry deletes a key SetEntry wrote.
func (b *Batch) DeleteEntry(key []byte) { b.entry(key, memberRemoved) }

func (b *Batch) entry(key []byte, op byte) {
	b.mutable()
	if !b.s.groups || len(key) <= suffixLen || !b.s.layout.isIndexKey(key) {
		if op == memberPresent {
			b.Set(key, nil)
		} else {
			b.Delete(key)
		}
		return
	}
	if !b.run.add(key, op) {
		b.run.flush(b.index())
		b.run.add(key, op)
	}
}

// flushRun writes the entry run, if any, to the index batch.
func (b *Batch) flushRun() {
	if b.run.active {
		b.index()
	}
}

// Stamp sets the version of the records the batch sets from here on: the
// engine's commit sequence of the batch.
func (b *Batch) Stamp(version uint64) {
	b.mutable()
	b.stamp = version
}

// Delete adds a point deletion of key to the batch. The key is copied.
func (b *Batch) Delete(key []byte) {
	b.mutable()
	_ = b.route(key).Delete(key, nil)
}

// DeleteRange adds a deletion of every key in [start, end) to the batch. The
// keys are copied. Range deletions are cheap to write; the covered data is
// reclaimed by later compactions.
func (b *Batch) DeleteRange(start, end []byte) {
	b.mutable()
	if b.s.index == nil {
		if lo := b.s.layout.pastOwn(start, end); end == nil || bytes.Compare(lo, end) < 0 {
			_ = b.pb.DeleteRange(lo, end, nil)
		}
		return
	}
	if lo, ok := b.s.layout.mainPart(start, end); ok {
		_ = b.pb.DeleteRange(lo, end, nil)
	}
	if lo, hi, ok := b.s.layout.indexPart(start, end); ok {
		_ = b.index().DeleteRange(lo, hi, nil)
	}
}

// route returns the Pebble batch that holds key's writes.
func (b *Batch) route(key []byte) *pebble.Batch {
	if b.s.index != nil && b.s.layout.isIndexKey(key) {
		return b.index()
	}
	return b.pb
}

// index returns the batch of index writes, creating it at first use, with
// the entry run written to it.
func (b *Batch) index() *pebble.Batch {
	if b.ib == nil {
		b.ib = b.s.index.db.NewBatch()
	}
	if b.ibWant > 0 {
		b.regrow(b.ib, &b.ibWant)
	}
	b.run.flush(b.ib)
	return b.ib
}

// hasIndexWrites reports whether Apply must apply to the index instance.
func (b *Batch) hasIndexWrites() bool { return b.run.active || (b.ib != nil && !b.ib.Empty()) }

// Len returns the encoded size of the batch in bytes (at least the 12-byte
// header, even when empty).
func (b *Batch) Len() int {
	b.flushRun()
	if b.hasIndexWrites() {
		return b.pb.Len() + b.ib.Len()
	}
	return b.pb.Len()
}

// Count returns the number of operations in the batch.
func (b *Batch) Count() uint32 {
	b.flushRun()
	if b.ib != nil {
		return b.pb.Count() + b.ib.Count()
	}
	return b.pb.Count()
}

// Empty reports whether the batch has no operations.
func (b *Batch) Empty() bool { return b.pb.Empty() && !b.hasIndexWrites() }

// Reset empties the batch for reuse, keeping its buffer. If the batch was
// applied with a sync still pending, Reset first waits for it (the result
// stays unobservable; call Wait before Reset to see it).
func (b *Batch) Reset() {
	if b.pb == nil {
		panic("store: batch used after Close")
	}
	b.syncWait()
	b.pbWant = b.pool(b.pb)
	b.pb.Reset()
	if b.ib != nil {
		b.ibWant = b.pool(b.ib)
		b.ib.Reset()
	}
	b.run.active = false
	b.applied = false
	b.waitErr = nil
	b.stamp, b.records = 0, false
}

// Close releases the batch. Like Reset, it first waits for a pending sync.
// Close is idempotent.
func (b *Batch) Close() {
	if b.pb == nil {
		return
	}
	b.syncWait()
	_ = b.pb.Close()
	b.pb = nil
	if b.ib != nil {
		_ = b.ib.Close()
		b.ib = nil
	}
}

func (b *Batch) syncWait() {
	b.indexWG.Wait()
	if b.needWait {
		b.needWait = false
		b.waitErr = b.pb.SyncWait()
	}
}

// Wait blocks until the applied batch is durable (Options.Sync=true) and
// returns the WAL sync error, if any; with Sync=false it returns at once.
// Either way it first waits for the index entries Apply left to a
// goroutine of its own (index.go; those of the batches held back with
// this one's, indexhold.go): their failure does not fail the batch, whose
// journal entry keeps them (applyIndex).
// Because the WAL is synced in order, a nil result also means every batch
// applied before this one is durable. Calling Wait again returns the same
// result. Wait may be called after Store.Close (which syncs the WAL).
func (b *Batch) Wait() error {
	if b.pb == nil {
		return ErrBatchClosed
	}
	if !b.applied {
		return store.ErrBatchNotApplied
	}
	b.syncWait()
	if b.waitErr != nil {
		b.s.disk.noteSyncError(b.waitErr)
		return fmt.Errorf("store: wal sync: %w", b.waitErr)
	}
	return nil
}

// Apply makes the batch visible atomically and returns without waiting for
// fsync; call Wait to wait for durability. This lets a caller release its own
// lock before waiting, so concurrent writers' batches are fsynced together
// (group commit). With Sync=false Wait returns at once.
//
// Apply uses Pebble's DB.ApplyNoSyncWait when Sync is set, else DB.Apply with
// NoSync. Applying an empty batch is a no-op that succeeds. After an error the
// batch must be Reset or Closed.
//
// Apply may block while Pebble stalls writes (too many queued memtables or
// L0 sublevels; see Metrics.WriteStalls); a caller holding its own lock
// around Apply stalls its other writers with it. While the disk is full
// (Metrics.DiskFull) it returns store.ErrDiskFull at once and applies nothing.
func (s *Store) Apply(b *Batch) error {
	if b.pb == nil {
		return ErrBatchClosed
	}
	if b.s != s {
		return errors.New("store: batch belongs to a different store")
	}
	if b.applied {
		return ErrBatchApplied
	}
	if b.records && b.stamp == 0 {
		return errors.New("store: a batch that sets records was not stamped with their version (Batch.Stamp)")
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	if s.disk.isFull() {
		// Before Pebble: a batch there would fill the memtables that
		// cannot be flushed and then wait for space without end.
		return s.disk.refuse()
	}
	b.applied = true
	b.flushRun()
	if s.index != nil && b.hasIndexWrites() {
		return s.applyIndex(b)
	}
	return s.applyMain(b)
}

// applyMain applies b's main batch; with Sync it returns before the fsync
// (Wait waits for it).
func (s *Store) applyMain(b *Batch) error {
	var err error
	if s.sync {
		err = s.db.ApplyNoSyncWait(b.pb, pebble.Sync)
		b.needWait = err == nil
	} else {
		err = s.db.Apply(b.pb, pebble.NoSync)
	}
	if err != nil {
		return fmt.Errorf("store: apply batch: %w", err)
	}
	return nil
}

// Commit is Apply followed by Wait: it returns once the batch is visible and,
// with Sync=true, durable.
func (s *Store) Commit(b *Batch) error {
	if err := s.Apply(b); err != nil {
		return err
	}
	return b.Wait()
}

// NewWriteBatch is NewBatch as the contract's WriteBatch.
func (s *Store) NewWriteBatch() store.WriteBatch { return s.NewBatch() }

// ApplyBatch is Apply for a batch made by NewWriteBatch. It never returns
// store.ErrConflict: see the contract's note on Pebble's preconditions.
func (s *Store) ApplyBatch(b store.WriteBatch) error {
	pb, ok := b.(*Batch)
	if !ok {
		return errors.New("store: ApplyBatch of a batch of another store")
	}
	return s.Apply(pb)
}

// Read is a read of the latest state. It records no precondition: the
// engine reads and applies under its write lock in the only process that
// holds the directory, so nothing can change in between.
func (b *Batch) Read(key, dst []byte, likelyMissing bool) ([]byte, bool, error) {
	if likelyMissing {
		return b.s.GetLikelyMissing(key, dst)
	}
	return b.s.Get(key, dst)
}

// ReadAbsent reports whether the latest state holds no key in
// [lower, upper), with one iterator probe. Like Read, it records nothing.
// A range of the main instance alone (a batch's record keys) is probed
// there, without waiting for an index batch still being applied on its
// own goroutine, which holds none of its keys: the writer builds its
// next batch meanwhile.
func (b *Batch) ReadAbsent(lower, upper []byte) (bool, error) {
	both := b.s.index != nil
	if both {
		_, _, both = b.s.layout.indexPart(lower, upper)
	}
	it, err := b.s.newIter(lower, upper, both)
	if err != nil {
		return false, err
	}
	found := it.First()
	if err := it.Error(); err != nil {
		it.Close()
		return false, err
	}
	return !found, it.Close()
}

// Expect records nothing, as Read does.
func (b *Batch) Expect([]byte, uint64) {}

// Position is 0: Pebble batches are numbered by the engine.
func (b *Batch) Position() uint64 { return 0 }
