package pebble

// Two Pebble instances: the records in one, the index entries in another.
//
// A non-unique index of values that arrive in random order (names, say)
// overlaps every flush with all of itself, so a level-0 compaction that
// takes a flush down rewrites the index's whole share of the base level,
// and that share grows with the data: the n-th flush rewrites n flushes'
// worth of entries. Records, the change log and indexes of rising values
// only append, and their flushed tables are moved down, not rewritten, as
// long as level 0 is compacted at every flush (L0CompactionThreshold 2).
// Pebble has one level-0 policy per instance, so the index entries live in
// an instance of their own, in Dir/index, whose level 0 holds four flushes
// before merging them (threshold 8): the random index is merged a quarter
// as often, and the appending spans of the main instance keep their moves.
// Its memtables are half the main one's; it flushes at half a memtable of
// index writes (flushAt), about as often as the main instance does under
// an indexed ingest, so that the journal entries are mostly trimmed before
// the main memtable holding them is flushed.
//
// Which keys are index entries the layout says (Layout.IndexSpan); the
// store reads no key's structure itself.
//
// The index instance has no write-ahead log. A batch's index writes are
// the index instance's own Pebble batch; its encoding goes into the main
// batch as one index journal entry (the store's own keys, layout.go), so
// the main instance's log makes the whole batch durable with one fsync. After
// a crash, Open applies the journal entries the index instance had not
// flushed; once a flush of the index instance has taken a batch, its
// entry is deleted. Three rules keep the two instances one store:
//
//   - Apply applies the main batch, then the index batch, holding applyMu
//     (a large index batch is held back and applied with those after it,
//     indexhold.go); a snapshot or an iterator over both opens its two
//     views holding it shared, with nothing held back, so no view holds
//     half of a batch.
//   - Before the index instance writes a flush, the main instance's log is
//     synced (indexFlushBegin): every batch in that flush is durable in the
//     main instance first, so after a crash the index instance never holds
//     a batch the main instance lost.
//   - Each index batch also sets appliedKey to its journal number, so the
//     flushed index instance says which entries it holds; the journal is
//     trimmed only below a number a finished flush covers.
//
// A store created before the index instance existed (its main instance
// holds data and Dir/index does not exist) keeps everything in the main
// instance, as it was written.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/protobase/protobase/internal/store"
)

// indexDirName is the index instance's directory inside Options.Dir.
const indexDirName = "index"

// indexL0CompactionThreshold is the index instance's level-0 threshold:
// Pebble compacts level 0 when 2 × sublevels reaches it, so 8 lets four
// flushes pile up before they are merged into the base level. More would
// merge less often (16 or 24 ingest a tag index up to a quarter faster
// past a million records), but every flush waiting in level 0 is one more
// table each seek of an index range reads: the first page of a query by
// tag took 1.6–2.3 times as long (docs/performance.md).
const indexL0CompactionThreshold = 8

// appliedKey is the index instance's own key (outside the index span,
// which Open checks, so no read of the store sees it): the journal number
// of the last batch applied, 8 bytes big-endian.
var appliedKey = []byte("\x00applied")

// reader returns what reads of the index entries read: the instance, or
// on a read-only store with journal entries to apply, the overlay over it.
func (ix *indexInstance) reader() pebbleReader {
	if ix.overlay != nil {
		return ix.overlay
	}
	return ix.db
}

// indexInstance is the index instance of a Store and what keeps it in
// step with the main one. db is immutable after Open.
type indexInstance struct {
	db *pebble.DB
	// overlay holds, on a store opened read-only, the journal entries the
	// index instance lacks (an indexed batch, read over db); nil
	// otherwise. Immutable after Open.
	overlay *pebble.Batch
	// applyMu is held exclusively while a batch is applied to both
	// instances and shared while a view of both is opened.
	applyMu sync.RWMutex
	// next is the journal number of the next batch with index writes, and
	// pending the bytes of index batches applied since the last flush
	// began; both guarded by applyMu (exclusive).
	next    uint64
	pending int64
	// flushAt is the pending bytes at which Apply asks for a flush: half a
	// memtable, so that the flush, not the memtable filling, cuts it, and
	// the journal entries it takes are trimmed while still in the main
	// instance's memtable (its flush then drops them instead of writing
	// them). Immutable.
	flushAt int64
	// asyncFrom is the size of an index batch from which applyIndex
	// holds it back (Options.AsyncIndexBytes), and holdBytes the size of
	// the batches held at which it applies them, on a goroutine of its
	// own (Options.IndexHoldBytes); grouped says the instance keeps entry
	// groups (groups.go). Immutable.
	asyncFrom, holdBytes int
	grouped              bool
	// held is what applyIndex holds back (indexhold.go); behind is set
	// while it holds anything and stuck while the last try to apply it
	// failed.
	held          heldIndex
	behind, stuck atomic.Bool
	// failApply is the error every apply to the instance fails with, for
	// tests of that failure; nil but in them. Guarded by applyMu.
	failApply error
	// trimMu serializes journal trimming with Checkpoint, which must copy
	// the index instance and then a journal that still covers it.
	trimMu sync.Mutex
	// trimmed is the number below which the journal was last trimmed;
	// guarded by trimMu.
	trimmed uint64

	kick chan struct{} // flushAt was reached: flush the index instance
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the flusher has returned (none read-only)
}

// openIndex opens or creates the index instance of s, whose main instance
// is open, applies the journal entries it lacks and starts its flusher. It
// leaves s.index nil for a store that keeps its index entries in the main
// instance.
func (s *Store) openIndex(o Options, fs vfs.FS, po *pebble.Options) error {
	dir := fs.PathJoin(o.Dir, indexDirName)
	if _, err := fs.Stat(dir); err != nil {
		_, marked, err := get(s.db, s.layout.mark, nil)
		switch {
		case err != nil:
			return err
		case marked:
			return fmt.Errorf("store: %s holds its index entries in %s, which is missing", o.Dir, dir)
		case o.ReadOnly || o.singleInstance:
			return nil
		}
		empty, err := s.mainEmpty()
		if err != nil || !empty {
			return err
		}
	}
	if !o.ReadOnly {
		if err := createDir(fs, dir); err != nil {
			return fmt.Errorf("store: create %s: %w", dir, err)
		}
	}
	groups, err := groupedInstance(fs, dir, o.ungrouped)
	if err != nil {
		return err
	}
	ipo := s.indexOptions(po)
	if groups {
		ipo.Merger = groupMerger
	}
	// The filesystem underneath the main instance's: the index instance
	// writes no log, and nil lets Pebble add its own health checks on the
	// disk, as it closes them with the instance.
	ipo.FS = nil
	if o.FS != nil {
		ipo.FS = fs
	}
	db, err := pebble.Open(dir, ipo)
	if err != nil {
		return fmt.Errorf("store: open index instance at %s: %w", dir, err)
	}
	ix := &indexInstance{
		db: db, flushAt: int64(ipo.MemTableSize / 2), asyncFrom: asyncIndexBytes, holdBytes: defaultIndexHoldBytes,
		grouped: groups, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if o.AsyncIndexBytes > 0 {
		ix.asyncFrom = o.AsyncIndexBytes
	}
	if o.IndexHoldBytes > 0 {
		ix.holdBytes = o.IndexHoldBytes
	}
	if err := s.recoverIndex(ix); err != nil {
		return errors.Join(err, db.Close())
	}
	if !o.ReadOnly {
		// Marked once the directory holds an instance, at every Open (a
		// crash before the first leaves an empty store and its directory).
		if err := s.db.Set(s.layout.mark, nil, pebble.Sync); err != nil {
			return errors.Join(fmt.Errorf("store: mark the index instance: %w", err), db.Close())
		}
	}
	s.index, s.groups = ix, groups
	if !o.ReadOnly {
		go s.flushIndex(ix)
	}
	return nil
}

// groupedInstance reports whether the index instance in dir keeps its
// entries in groups: a new one does (unless ungrouped), an existing one
// if its options name the group merger, which Pebble checks at open.
func groupedInstance(fs vfs.FS, dir string, ungrouped bool) (bool, error) {
	desc, err := pebble.Peek(dir, fs)
	if err != nil {
		return false, fmt.Errorf("store: open index instance at %s: %w", dir, err)
	}
	if !desc.Exists || desc.OptionsFilename == "" {
		return !ungrouped, nil
	}
	f, err := fs.Open(desc.OptionsFilename)
	if err != nil {
		return false, fmt.Errorf("store: open index instance at %s: %w", dir, err)
	}
	opts, err := io.ReadAll(f)
	if err = errors.Join(err, f.Close()); err != nil {
		return false, fmt.Errorf("store: open index instance at %s: read %s: %w", dir, desc.OptionsFilename, err)
	}
	for line := range strings.Lines(string(opts)) {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "merger="); ok {
			return name == groupMergerName, nil
		}
	}
	return false, fmt.Errorf("store: open index instance at %s: %s names no merger", dir, desc.OptionsFilename)
}

// mainEmpty reports whether the main instance holds no key: a new store,
// which gets an index instance.
func (s *Store) mainEmpty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, fmt.Errorf("store: open: %w", err)
	}
	found := it.First()
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return false, fmt.Errorf("store: open: %w", err)
	}
	return !found, nil
}

// indexOptions derives the index instance's options from the main one's:
// no log, level 0 in tiers, half the memtable, the same block cache.
func (s *Store) indexOptions(po *pebble.Options) *pebble.Options {
	ipo := *po
	ipo.DisableWAL = true
	ipo.L0CompactionThreshold = indexL0CompactionThreshold
	ipo.MemTableSize = max(po.MemTableSize/2, 4<<20)
	ipo.TargetFileSizes[0] = l0TargetFileSize(int64(ipo.MemTableSize))
	ipo.EventListener = s.eventListener(instIndex)
	ipo.EventListener.FlushBegin = s.indexFlushBegin
	return &ipo
}

// indexFlushBegin syncs the main instance's log before the index instance
// writes a flush, so that the flush holds no batch the main instance could
// still lose. Pebble calls it on the flushing goroutine; the flush waits.
func (s *Store) indexFlushBegin(pebble.FlushInfo) {
	if s.readOnly {
		return
	}
	if err := s.db.LogData([]byte{0}, pebble.Sync); err != nil {
		s.logger.Error("store: sync the log before an index flush", "err", err)
	}
}

// recoverIndex applies to ix the journal entries it lacks and sets ix.next.
func (s *Store) recoverIndex(ix *indexInstance) error {
	var applied uint64
	v, found, err := get(ix.db, appliedKey, nil)
	switch {
	case err != nil:
		return fmt.Errorf("store: index instance: read applied mark: %w", err)
	case found && len(v) != 8:
		return fmt.Errorf("store: index instance: applied mark of %d bytes", len(v))
	case found:
		applied = binary.BigEndian.Uint64(v)
	}
	ix.next, ix.trimmed = applied+1, applied+1
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: s.layout.journalKey(nil, applied+1),
		UpperBound: s.layout.journalEnd,
	})
	if err != nil {
		return fmt.Errorf("store: read index journal: %w", err)
	}
	replayed := 0
	for ok := it.First(); ok; ok = it.Next() {
		n, isEntry := s.layout.journalEntry(it.Key())
		if !isEntry {
			err = fmt.Errorf("store: index journal: malformed key % x", it.Key())
			break
		}
		if err = ix.replay(n, it.Value(), s.readOnly); err != nil {
			break
		}
		ix.next = n + 1
		replayed++
	}
	if err = errors.Join(err, it.Error(), it.Close()); err != nil {
		if ix.overlay != nil {
			_ = ix.overlay.Close()
		}
		return err
	}
	if replayed > 0 {
		s.logger.Info("store: applied the index journal", "batches", replayed)
	}
	return nil
}

// replay applies journal entry n, an encoded index batch; on a read-only
// store, to the overlay, as nothing may be written.
func (ix *indexInstance) replay(n uint64, repr []byte, readOnly bool) error {
	b := ix.db.NewBatch()
	defer b.Close()
	if err := b.SetRepr(bytes.Clone(repr)); err != nil {
		return fmt.Errorf("store: index journal entry %d: %w", n, err)
	}
	if readOnly {
		if ix.overlay == nil {
			ix.overlay = ix.db.NewIndexedBatch()
		}
		if err := ix.overlay.Apply(b, nil); err != nil {
			return fmt.Errorf("store: index journal entry %d: %w", n, err)
		}
		return nil
	}
	if err := ix.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("store: index journal entry %d: apply: %w", n, err)
	}
	return nil
}

// applyIndex applies b to both instances: the index batch's encoding goes
// into the main batch as its journal entry. An index batch of at least
// asyncIndexBytes (Options.AsyncIndexBytes) is held back (indexhold.go);
// once Options.IndexHoldBytes are held, they are applied to the index
// instance together on a goroutine of its own, which releases applyMu
// when done: the writer goes on to receive and prepare its next batch
// meanwhile. Every view of the index (NewIter, NewSnapshot, a point read
// of an index key, Flush, Compact, Close) applies what is held and waits
// for that goroutine first, so no reader sees a batch's records without
// its entries in one view, and the writer's own next checks see them
// (settle). A smaller batch is applied at once, after what is held. It
// returns an error only when nothing of b was applied.
func (s *Store) applyIndex(b *Batch) error {
	ix := s.index
	ix.applyMu.Lock()
	if ix.stuck.Load() {
		// Index writes that failed to apply are held: they go first, and
		// until they apply the store takes no batch, so that what is held
		// does not grow and no later batch's entries pass them.
		if err := ix.applyHeld(); err != nil {
			ix.applyMu.Unlock()
			return fmt.Errorf("store: index writes of earlier batches still fail to apply; this batch was not written: %w", err)
		}
	}
	n := ix.next
	ix.next++
	binary.BigEndian.PutUint64(b.mark[:], n)
	_ = b.ib.Set(appliedKey, b.mark[:], nil)
	b.jkey = s.layout.journalKey(b.jkey[:0], n)
	repr := b.ib.Repr()
	_ = b.pb.Set(b.jkey, repr, nil)
	if ix.pending += int64(len(repr)); ix.pending >= ix.flushAt {
		select {
		case ix.kick <- struct{}{}:
		default:
		}
	}
	if err := s.applyMain(b); err != nil {
		ix.applyMu.Unlock()
		return err
	}
	if len(repr) < ix.asyncFrom {
		defer ix.applyMu.Unlock()
		// The index instance takes the batches in order: those held first.
		err := ix.applyHeld()
		if err == nil {
			err = ix.apply(b.ib)
		}
		if err != nil {
			s.heldFailed(repr, err)
		}
		return nil
	}
	ix.hold(repr)
	if len(ix.held.reprs) < ix.holdBytes {
		ix.applyMu.Unlock()
		return nil
	}
	b.indexWG.Add(1)
	go func() {
		if err := ix.applyHeld(); err != nil {
			s.logHeldFailed(err)
		}
		ix.applyMu.Unlock()
		b.indexWG.Done()
	}()
	return nil
}

// heldFailed takes the index writes repr of a batch whose main batch is
// applied, and whose index writes (or those held before them) failed to
// apply: the batch stands, its journal entry holding them, so Apply
// reports no error (an error would say nothing was applied, and the
// engine would number its next batch as this one). They are held behind
// those that failed (stuck), so that a flush keeps their journal entries;
// the next batch tries them first and is refused while they fail. The
// caller holds applyMu.
func (s *Store) heldFailed(repr []byte, err error) {
	s.index.hold(repr)
	s.index.stuck.Store(true)
	s.logHeldFailed(err)
}

func (s *Store) logHeldFailed(err error) {
	s.logger.Error("store: apply index writes to the index instance; they stay held, and the next batch tries them first", "err", err)
}

// asyncIndexBytes is the size of an index batch from which applyIndex
// holds it back. A batch of 1,000 records of ten tags is about 50 KiB and
// takes a millisecond or more to insert into the memtable; holding it
// makes a read that comes meanwhile apply it first, a cost worth taking
// for bulk writes only.
const asyncIndexBytes = 16 << 10

// apply applies an index batch to the instance. The instance has no log,
// so this cannot fail on I/O; should it fail, the journal entry is durable
// and the next Open applies it.
func (ix *indexInstance) apply(ib *pebble.Batch) error {
	err := ix.failApply
	if err == nil {
		err = ix.db.Apply(ib, pebble.NoSync)
	}
	if err != nil {
		return fmt.Errorf("store: apply batch to the index instance (restart to apply it from the journal): %w", err)
	}
	return nil
}

// flushIndex flushes the index instance each time half a memtable of index
// writes is pending, and then trims the journal of what the flush took.
func (s *Store) flushIndex(ix *indexInstance) {
	defer close(ix.done)
	for {
		select {
		case <-ix.stop:
			return
		case <-ix.kick:
		}
		// A full disk is logged where it is met (diskfull.go).
		if err := s.flushAndTrim(ix); err != nil && !errors.Is(err, store.ErrDiskFull) {
			s.logger.Error("store: flush the index instance", "err", err)
		}
	}
}

// flushAndTrim flushes every index batch applied so far and deletes their
// journal entries. It gives up, trimming nothing, when Close stops it or
// the disk is full (the journal keeps them until a later flush).
func (s *Store) flushAndTrim(ix *indexInstance) error {
	ix.trimMu.Lock()
	defer ix.trimMu.Unlock()
	ix.applyMu.Lock()
	if err := ix.applyHeld(); err != nil {
		ix.applyMu.Unlock()
		return err
	}
	upTo := ix.next // every batch numbered below it is in the memtables
	ix.pending = 0
	flushed, err := ix.db.AsyncFlush()
	ix.applyMu.Unlock()
	if err != nil {
		return err
	}
	err = s.waitFlushed(flushed, ix.stop)
	if errors.Is(err, errStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.trimJournal(ix, upTo)
}

// trimJournal deletes the journal entries numbered below upTo, which the
// index instance has flushed. The caller holds trimMu.
func (s *Store) trimJournal(ix *indexInstance, upTo uint64) error {
	if upTo <= ix.trimmed {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange(s.layout.journal, s.layout.journalKey(nil, upTo), nil)
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("trim the index journal: %w", err)
	}
	ix.trimmed = upTo
	return nil
}

// closeIndex stops the flusher, flushes the index instance (so that a clean
// Close leaves no journal to apply) and closes it. The main instance must
// still be open.
func (s *Store) closeIndex() error {
	ix := s.index
	if ix == nil {
		return nil
	}
	var err error
	ix.settle()
	if !s.readOnly {
		close(ix.stop)
		<-ix.done
		// Nothing applies batches any more (Close holds the store's lock).
		// On a full disk the flush cannot finish: the journal keeps the
		// batches, and the next Open applies them.
		if err = s.flushDB(ix.db); errors.Is(err, store.ErrDiskFull) {
			err = nil
		} else if err == nil && !ix.behind.Load() {
			// (Batches still held, their apply having failed, keep their
			// journal entries for the next Open.)
			ix.trimMu.Lock()
			err = s.trimJournal(ix, ix.next)
			ix.trimMu.Unlock()
		}
	}
	if ix.overlay != nil {
		err = errors.Join(err, ix.overlay.Close())
	}
	return errors.Join(err, ix.db.Close())
}

// checkpointIndex writes the index instance's copy to dir/index: its
// flushed tables, copied before the main instance's (main), under trimMu,
// so the main copy's journal covers every batch the index copy lacks and
// the index copy holds none the main copy lacks.
func (s *Store) checkpointIndex(dir string, main func() error) error {
	ix := s.index
	ix.trimMu.Lock()
	defer ix.trimMu.Unlock()
	tmp := dir + ".index"
	if err := ix.db.Checkpoint(tmp); err != nil {
		return fmt.Errorf("store: checkpoint the index instance: %w", err)
	}
	if err := main(); err != nil {
		return err
	}
	if err := s.fs.Rename(tmp, s.fs.PathJoin(dir, indexDirName)); err != nil {
		return fmt.Errorf("store: checkpoint: %w", err)
	}
	return syncDir(s.fs, dir)
}
