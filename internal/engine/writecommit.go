package engine

import (
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/store"
)

// prepareFresh is phase 1 against the current catalog. On a shared store a
// record may be of a type or version another server applied a moment ago,
// so a refusal is checked again against a refreshed catalog first.
func (w *Writer) prepareFresh(op Op, recs []*anypb.Any) (*catalog, bool, error) {
	e := w.e
	cat := e.cat.Load()
	dups, err := w.prepare(cat, op, recs)
	if err == nil || !e.st.Shared() {
		return cat, dups, err
	}
	e.writeMu.Lock()
	_, rerr := e.refreshSchema()
	cur := e.cat.Load() // maybe refreshed by the schema watch meanwhile
	e.writeMu.Unlock()
	if rerr != nil {
		return nil, false, storeError(rerr)
	}
	if cur != cat {
		cat = cur
		dups, err = w.prepare(cat, op, recs)
	}
	return cat, dups, err
}

// commitLocked takes writeMu and commits the batch prepared against cat
// into b, preparing again if the schema changed since and checking again
// (up to maxConflicts times) when a shared store reports a conflict.
func (w *Writer) commitLocked(b store.WriteBatch, cat *catalog, op Op, recs []*anypb.Any, dups bool) error {
	e := w.e
	if !w.times.start.IsZero() {
		w.times.waitStart = time.Now()
		e.writeMu.Lock()
		w.times.wait = time.Since(w.times.waitStart)
	} else {
		e.writeMu.Lock()
	}
	defer e.writeMu.Unlock()
	var err error
	for attempt := 0; ; attempt++ {
		if cur := e.cat.Load(); cur != cat {
			// The schema changed since phase 1: prepare again under the lock.
			cat = cur
			if dups, err = w.prepare(cat, op, recs); err != nil {
				return err
			}
		}
		err = w.commit(b, cat, op, dups)
		if !errors.Is(err, store.ErrConflict) {
			err = w.recheckRefusal(b, err)
		}
		if !errors.Is(err, store.ErrConflict) || attempt == maxConflicts {
			break
		}
		// Another server wrote a key the checks read, or changed the
		// schema: check again on fresh reads (and the new schema).
		b.Reset()
		if _, err = e.refreshSchema(); err != nil {
			break
		}
	}
	return storeError(err)
}

// recheckRefusal judges a shared store's refusal of a conditional batch
// (an insert of a key that exists, an update of one that does not): the
// conditions were read on a snapshot older than the reads that refused
// it, so a writer in between may have changed what they name. The
// refusal stands only when every read of the batch, all preconditions of
// b, still holds at one moment (store.Checker): then the conditions held
// and the records refused the batch together. Otherwise the result is
// store.ErrConflict and the batch is checked again on fresh reads, so a
// transaction that read the key before that writer fails its condition
// (ABORTED, which it retries) or goes through; it never meets the record
// check of a state its conditions did not see.
func (w *Writer) recheckRefusal(b store.WriteBatch, err error) error {
	var ae *apierror.Error
	checker, ok := w.e.st.(store.Checker) // shared stores only
	if err == nil || len(w.conds.list) == 0 || !ok || !errors.As(err, &ae) {
		return err
	}
	switch ae.Code {
	case apierror.NotFound, apierror.AlreadyExists, apierror.OutOfRange:
	default:
		return err
	}
	if testHookRefused != nil {
		testHookRefused()
	}
	if cerr := checker.CheckBatch(b); cerr != nil {
		return cerr
	}
	return err
}

// maxConflicts bounds how often one batch is re-checked after losing its
// preconditions to writers on other servers sharing the store.
const maxConflicts = 16

// commit is phase 2 and the apply, under writeMu, for a batch prepared
// against cat. It returns store.ErrConflict when a key the checks read (or
// the schema key) changed since on a shared store; the caller then checks
// again on fresh reads, so the batch meets the same ALREADY_EXISTS,
// NOT_FOUND or unique violation it would have met had it come second.
func (w *Writer) commit(b store.WriteBatch, cat *catalog, op Op, dups bool) error {
	e := w.e
	b.Expect(keySchema, cat.ver)
	if done, err := w.commitConditions(b); done || err != nil {
		return err
	}
	// The batch's records carry its commit sequence as their version
	// (a store that numbers its batches itself ignores it).
	b.Stamp(e.writeMu.seq + 1)
	if err := w.build(b, op, dups); err != nil {
		return err
	}
	e.writeMu.seq++
	seq := e.writeMu.seq
	binary.BigEndian.PutUint64(w.seq[:], seq)
	b.Set(keySeq, w.seq[:])
	logOn := e.clog.On()
	if logOn {
		e.clog.Put(b, seq, &w.entry)
	}
	// The batch's records leave the cache before they change (the cache is
	// nil on a shared store).
	e.cache.BeginWrite()
	for i := range w.preps {
		e.cache.Invalidate(w.bytes(w.preps[i].key))
	}
	err := e.st.ApplyBatch(b)
	e.cache.EndWrite()
	if err != nil {
		e.writeMu.seq--
		return err
	}
	w.position = seq
	// What the storage batch holds: the records with their keys and
	// index entries (the arena), and the change log's entry.
	w.batchBytes = int64(len(w.arena))
	for i := range w.preps {
		w.batchBytes += int64(len(w.preps[i].value()))
	}
	if logOn {
		w.batchBytes += w.entry.Stored()
		e.clog.Applied(seq, &w.entry)
	}
	if p := b.Position(); p != 0 {
		w.position = p
	}
	return nil
}

// commitCounts count the batches committed and their records, and which
// of them are known durable: what Observer.GroupCommit reports. Kept only
// when the engine has an Observer.
type commitCounts struct {
	mu                             sync.Mutex
	batches, records               uint64
	durableBatches, durableRecords uint64
}

// committed counts a batch of n records committed, in t.
func (c *commitCounts) committed(t *batchTimes, n int) {
	c.mu.Lock()
	c.batches++
	c.records += uint64(n)
	t.commits, t.records = c.batches, c.records
	c.mu.Unlock()
}

// observeDurable reports a batch known durable to obs, with the batches
// committed since the last one known durable: the write-ahead log syncs
// in commit order, so one fsync made them durable together with it.
func (e *Engine) observeDurable(t *batchTimes) {
	now := time.Now()
	if t.ctx != nil {
		e.writeSpans(t, now)
	}
	obs := e.opts.Observer
	if obs == nil {
		return
	}
	obs.WriteDurable(now.Sub(t.start), t.applied.Sub(t.start)-t.wait, t.wait, now.Sub(t.applied))
	c := &e.commits
	c.mu.Lock()
	if t.commits <= c.durableBatches {
		c.mu.Unlock()
		return
	}
	batches, records := t.commits-c.durableBatches, t.records-c.durableRecords
	c.durableBatches, c.durableRecords = t.commits, t.records
	c.mu.Unlock()
	obs.GroupCommit(batches, records)
}
