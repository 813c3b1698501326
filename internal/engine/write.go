package engine

import (
	"bytes"
	"context"
	"errors"
	"hash/maphash"
	"time"
	"unsafe"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/store"
)

// maxPending is how many applied batches a Writer lets wait for their fsync
// while it prepares the next: the stream keeps going while the disk syncs.
const maxPending = 2

// Writer applies the batches of one write stream in order and keeps the
// counts that errors and acknowledgements report. A batch is applied
// (visible) when Apply returns; it is durable once Sync returns. Batches
// are never acknowledged before Sync. A Writer is not safe for concurrent
// use; its scratch buffers are reused from batch to batch so the hot path
// does not allocate per record.
type Writer struct {
	e *Engine

	batches  uint64 // batches applied on this stream
	records  uint64 // records applied on this stream
	position uint64 // commit sequence of the last applied batch
	durable  uint64 // commit sequence known durable

	pending []pendingBatch // applied, fsync not yet waited for, oldest first
	free    []store.WriteBatch
	// cur is the batch phase 2 builds: its reads are the batch's
	// preconditions (store.WriteBatch.Read).
	cur store.WriteBatch
	// seq holds the commit sequence value a batch writes: a field, as a
	// local passed to an interface method would escape (one allocation
	// per batch).
	seq [8]byte
	// entry is the batch's change-log entry being built, its buffers
	// reused from batch to batch.
	entry changelog.Builder
	// reserved is the write budget the transport took for the request
	// the next Apply applies (Use); batchBytes what the storage batch
	// last committed holds (commit).
	reserved   Reserved
	batchBytes int64
	// batch is the batch Apply is applying: its conditions and patch.
	batch Batch
	// conds are the batch's conditions, compiled (conditions.go).
	conds conditions
	// ops is each record's operation when they differ (resolveOps);
	// empty when the batch has one operation.
	ops []Op
	// patches are the batch's patch compiled per record type; patched
	// holds the patched records phase 2 builds (see patch.go).
	patches patchCache
	patched []byte
	// phase1 is the batch's records checked and keyed, and phase 1's
	// scratch: embedded so that a batch prepared ahead (Ahead) is swapped
	// in whole.
	phase1

	// Per-batch scratch of phase 2.
	oldBuf []byte // value of the record being replaced
	ixBuf  []byte // value of a unique index entry being checked
	// holdBuf is the record holding a unique value being checked.
	holdBuf []byte
	// now is the time the batch's conditions and build compare expiries
	// with, read once per commit (commitConditions): an expired record is
	// absent to the batch.
	now instant
	// expired counts the records the last build of an opExpire batch
	// deleted.
	expired int
	oldIx   []byte
	oldOcc  []occurrence // where the key fields of the record being replaced lie
	oldEnds []int32
	sorted  []sortedEntry      // putSorted's scratch
	sortBuf []sortedEntry      // sortEntries' scratch
	groups  groupScratch       // putGroups' scratch
	ov      map[string]ovEntry // in-batch overlay; used only when the batch repeats a key
	// aggs are the batch's changes of aggregate index entries (aggindex.go).
	aggs aggChanges
	// times are the timings of the batch being applied, taken only when
	// the engine has an Observer.
	times batchTimes

	// Expired records a write replaces (replaced.go): reapFirst says the
	// batch being built reaps them first, replaced lists them, reaper is
	// the writer that reaps them, and replaceInPlace (a replay's writer)
	// never reaps first.
	reapFirst      bool
	replaceInPlace bool
	replaced       []replacedRec
	reaper         *Writer
}

// pendingBatch is an applied batch whose fsync the writer has not waited
// for, with the commit sequence it made durable once synced and the bytes
// of the write budget it holds until then.
type pendingBatch struct {
	b    store.WriteBatch
	pos  uint64
	held int64
	// times are the batch's timings, when an Observer or a span takes them.
	times batchTimes
}

// span is a [start, end) range of Writer.arena. An index key span is empty
// when the record has no entry in that index (a unique index and an absent
// field, see keyExtractor.absent).
type span struct{ s, e int32 }

// prep is one record after phase 1.
type prep struct {
	t   *recType
	val []byte // the record bytes as received
	key span   // record key
	pk  span   // primary-key part of key
	ix  int32  // first entry in ixOff; one per maintained index (none for remove)
	op  Op     // the record's operation
	url string
	// patch is a patched record's patch, out the patched record phase 2
	// built (in Writer.patched).
	patch *record.Patch
	out   []byte
}

// value returns the record p writes: as received, or as patched.
func (p *prep) value() []byte {
	if p.op == OpPatch {
		return p.out
	}
	return p.val
}

// ovEntry is the batch-local state of a key written earlier in the batch.
type ovEntry struct {
	val     []byte
	deleted bool
}

// NewWriter starts a write stream.
func (e *Engine) NewWriter() *Writer {
	return &Writer{e: e, phase1: phase1{seen: make(map[uint64]struct{}), seed: maphash.MakeSeed()}}
}

// forget drops the writer's references into the batch it applied: an idle
// stream must not keep its last request's record bytes alive outside the
// in-flight budget, which it has given back. The slices keep their
// capacity for the next batch.
func (w *Writer) forget() {
	w.Use(Reserved{}) // a reservation Apply did not take: its request is refused
	w.batch = Batch{}
	w.conds.forget()
	clear(w.preps)
	clear(w.ov)
	clear(w.replaced)
	w.replaced = w.replaced[:0]
	w.entry.Forget()
	if cap(w.patched) > maxKeptPatched {
		w.patched = nil
	}
	w.trim()
}

// trim drops the scratch of phase 1 and 2 that a batch grew past what an
// idle stream keeps (maxKeptArena): a stream that once wrote a batch of
// large records or many index entries keeps none of it outside the write
// budget.
func (w *Writer) trim() {
	w.phase1.trim()
	for _, b := range []*[]byte{&w.oldBuf, &w.ixBuf, &w.holdBuf, &w.oldIx} {
		if cap(*b) > maxKeptArena {
			*b = nil
		}
	}
	if (cap(w.sorted)+cap(w.sortBuf))*int(unsafe.Sizeof(sortedEntry{})) > maxKeptArena {
		w.sorted, w.sortBuf = nil, nil
	}
	w.groups.trim()
}

// Batches returns the number of batches applied on the stream.
func (w *Writer) Batches() uint64 { return w.batches }

// Records returns the number of records applied on the stream.
func (w *Writer) Records() uint64 { return w.records }

// Apply applies one batch atomically. On error nothing of the batch is
// applied, earlier batches stay applied, and the *apierror.Error names the
// batch, record and field, with the counts applied before it. Apply does not
// wait for durability; call Sync before acknowledging.
func (w *Writer) Apply(ctx context.Context, b Batch) error {
	defer w.forget()
	w.batch, w.conds.ctx = b, ctx
	w.times = batchTimes{}
	if traced := w.e.traced(ctx); traced || w.e.opts.Observer != nil {
		w.times.start = time.Now()
		if traced {
			w.times.ctx = ctx
		}
	}
	op, recs := w.resolveOps(b), b.Records
	if err := w.apply(ctx, op, recs); err != nil {
		var e *apierror.Error
		if !errors.As(err, &e) {
			e = &apierror.Error{Code: apierror.Internal, Msg: err.Error(), Err: err}
		}
		return w.stamp(e)
	}
	w.batches++
	w.records += uint64(len(recs))
	if op != opExpire { // the reaper counts its own (Stats.Expired)
		w.e.stats.Batches.Add(1)
		w.e.stats.Records.Add(uint64(len(recs)))
	}
	w.count(op, len(recs))
	return nil
}

// Position returns the commit sequence of the last batch applied on the
// stream (0 before the first).
func (w *Writer) Position() uint64 { return w.position }

// Durable returns the position up to which the stream's batches are known
// durable without waiting: what Sync returned last, or later, as Apply
// waits for old batches to bound the ones in flight. An acknowledgement
// for a batch at or below it may go out at once.
func (w *Writer) Durable() uint64 { return w.durable }

// Sync waits until every batch applied on the stream is durable and
// returns the durable position.
func (w *Writer) Sync() (uint64, error) {
	if w.reaper != nil {
		if _, err := w.reaper.Sync(); err != nil {
			return w.durable, err
		}
	}
	for len(w.pending) > 0 {
		if err := w.waitOldest(); err != nil {
			return w.durable, err
		}
	}
	w.durable = w.position
	return w.durable, nil
}

// Close releases the writer's storage batches after waiting for them,
// and a reservation handed with Use and not used.
func (w *Writer) Close() error {
	w.Use(Reserved{})
	_, err := w.Sync()
	if w.reaper != nil {
		err = errors.Join(err, w.reaper.Close())
	}
	for _, b := range w.free {
		b.Close()
	}
	w.free = nil
	return err
}

func (w *Writer) waitOldest() error {
	p := w.pending[0]
	w.pending = w.pending[1:]
	err := p.b.Wait()
	p.b.Reset()
	w.e.inflight.release(p.held)
	w.free = append(w.free, p.b)
	if err != nil {
		return &apierror.Error{Code: apierror.Internal, Msg: "wait for durability: " + err.Error(), Err: err}
	}
	// Batches are durable in commit order (store's prefix durability).
	w.durable = max(w.durable, p.pos)
	w.e.clog.Synced(p.pos)
	if !p.times.start.IsZero() {
		w.e.observeDurable(&p.times)
	}
	return nil
}

func (w *Writer) apply(ctx context.Context, op Op, recs []*anypb.Any) error {
	e := w.e
	size, err := w.admit(ctx, op, recs)
	if err != nil || (len(recs) == 0 && len(w.batch.Conditions) == 0) {
		return err
	}
	held, err := w.takeReserved(ctx, size)
	if err != nil {
		return err
	}
	// The request's bytes: the transport lets go of it once Apply is back.
	defer e.inflight.release(held)
	cat, dups, err := w.prepareBatch(op, recs)
	if err != nil {
		return err
	}

	// Bound the stream's unsynced batches before taking the lock.
	for len(w.pending) >= maxPending {
		if err := w.waitOldest(); err != nil {
			return err
		}
	}
	var b store.WriteBatch
	if n := len(w.free); n > 0 {
		b, w.free = w.free[n-1], w.free[:n-1]
	} else {
		b = e.st.NewWriteBatch()
	}
	err = w.commitReapingFirst(ctx, b, cat, op, recs, dups)
	none := errors.Is(err, errNoneExpired)
	if none {
		err = nil
	}
	if err != nil || len(recs) == 0 || none {
		// Nothing to wait for: a failed batch, one of conditions alone, or
		// a reaper's batch whose records were all written again since.
		b.Reset()
		w.free = append(w.free, b)
		return err
	}
	// The storage batch holds its bytes until it is durable (waitOldest).
	e.inflight.force(w.batchBytes)
	if !w.times.start.IsZero() {
		w.times.applied = time.Now()
		e.commits.committed(&w.times, len(recs))
	}
	w.pending = append(w.pending, pendingBatch{b: b, pos: w.position, held: w.batchBytes, times: w.times})
	return nil
}

// admit refuses a batch the engine cannot take (closed engine, cancelled
// call, unknown operations, over the record or in-flight byte limits) and
// returns the bytes it holds.
func (w *Writer) admit(ctx context.Context, op Op, recs []*anypb.Any) (int64, error) {
	e := w.e
	if e.closed.Load() {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := w.checkOps(op, len(recs)); err != nil {
		return 0, err
	}
	if max := e.opts.MaxRecordsPerBatch; len(recs) > max {
		return 0, recordError(apierror.ResourceExhausted, max, "", "",
			"batch holds "+itoa(len(recs))+" records, more than the limit of "+itoa(max))
	}
	var size int64
	for _, a := range recs {
		size += int64(len(a.GetValue()) + len(a.GetTypeUrl()))
	}
	if size > e.opts.MaxInflightBytes {
		return 0, recordError(apierror.ResourceExhausted, 0, "", "",
			"batch of "+itoa(int(size))+" bytes exceeds the server's in-flight limit of "+itoa(int(e.opts.MaxInflightBytes)))
	}
	return size, nil
}

// absent reports whether the store holds no key in [lo, hi]. One iterator
// probe answers for a whole batch of ascending or clustered keys, the
// common shape of bulk inserts. A range of one key (a batch of one
// record) is a point read: it reads only the instance holding the key,
// where an iterator over a range of the store positions one in each,
// which cost a quarter of a single-record insert's CPU.
func (w *Writer) absent(lo, hi span) (bool, error) {
	if lo == hi || bytes.Equal(w.bytes(lo), w.bytes(hi)) {
		_, found, err := w.cur.Read(w.bytes(lo), w.oldIx[:0], true)
		return !found, err
	}
	w.oldIx = append(append(w.oldIx[:0], w.bytes(hi)...), 0)
	return w.cur.ReadAbsent(w.bytes(lo), w.oldIx)
}

func (w *Writer) bytes(s span) []byte { return w.arena[s.s:s.e] }

// get reads a key as the batch has left it so far. A value read from the
// store lands in *buf and stays valid until the next get with that buffer.
// likelyMissing picks the read that consults bloom filters on every level,
// cheaper for keys that are usually absent (inserts, unique values).
func (w *Writer) get(k []byte, buf *[]byte, dups, likelyMissing bool) ([]byte, bool, error) {
	if dups || len(w.ov) > 0 {
		if ov, ok := w.ov[string(k)]; ok {
			return ov.val, !ov.deleted, nil
		}
	}
	v, found, err := w.cur.Read(k, (*buf)[:0], likelyMissing)
	if found {
		*buf = v
	}
	return v, found, err
}

func (w *Writer) set(b store.WriteBatch, k, v []byte, dups bool) {
	b.Set(k, v)
	if dups {
		w.ov[string(k)] = ovEntry{val: v}
	}
}

// writeEntry writes entry k of ix with value v (a unique entry's primary
// key; none for a grouped index's, which is never unique).
func writeEntry(b store.WriteBatch, ix *index, k, v []byte) {
	if ix.grouped {
		b.SetEntry(k)
	} else {
		b.Set(k, v)
	}
}

// setEntry writes entry k of ix, with value v, as set does.
func (w *Writer) setEntry(b store.WriteBatch, ix *index, k, v []byte, dups bool) {
	writeEntry(b, ix, k, v)
	if dups {
		w.ov[string(k)] = ovEntry{val: v}
	}
}

// delEntry deletes entry k of ix, as del does.
func (w *Writer) delEntry(b store.WriteBatch, ix *index, k []byte, record bool) {
	if ix.grouped {
		b.DeleteEntry(k)
	} else {
		b.Delete(k)
	}
	if record {
		w.ov[string(k)] = ovEntry{deleted: true}
	}
}

// del deletes a key. record says the deletion must be visible to later
// records of the batch even on the fast path: a unique value freed by one
// record may be taken by a later one, and phase 1 cannot see that coming.
func (w *Writer) del(b store.WriteBatch, k []byte, record bool) {
	b.Delete(k)
	if record {
		w.ov[string(k)] = ovEntry{deleted: true}
	}
}

// build is phase 2, under writeMu: for every record in order, the
// existence check, applying a patch, the uniqueness check, retracting the
// index entries of the record it replaces, and putting the new record and
// its entries. op is the batch's operation (0 when its records differ);
// each record follows its own.
func (w *Writer) build(b store.WriteBatch, op Op, dups bool) error {
	if w.ov == nil {
		w.ov = make(map[string]ovEntry)
	}
	clear(w.ov)
	w.cur = b
	defer func() { w.cur = nil }()
	// A build after a conflict starts phase 2 over.
	w.arena, w.ixOff, w.patched = w.arena[:w.prepArena], w.ixOff[:w.prepIx], w.patched[:0]
	w.mkeys = w.mkeys[:w.prepMulti]
	w.aggs.reset()
	w.expired = 0
	logOn := w.e.clog.On()
	if logOn {
		recBytes := 0
		for i := range w.preps {
			recBytes += len(w.preps[i].val)
		}
		w.entry.Begin(len(w.preps), recBytes)
	}
	pr, err := w.probe(op)
	if err != nil {
		return err
	}
	// A batch of new, distinct keys replaces nothing and deletes nothing,
	// so the order of its writes is free: grouped writes them by kind.
	grouped := !dups && (op == OpInsert || (op == OpUpsert && pr.recsAbsent))
	for i := range w.preps {
		p := &w.preps[i]
		old, found, err := w.existing(p.op, p, dups, pr)
		if err != nil {
			return err
		}
		if p.op == opExpire {
			if err := w.expire(b, p, old, found, dups, logOn); err != nil {
				return err
			}
			continue
		}
		if err := w.change(b, i, p, old, found, dups, pr, logOn); err != nil {
			return err
		}
		if p.op != OpRemove && !grouped {
			w.put(b, p, dups)
		}
	}
	if grouped {
		w.putGrouped(b)
	}
	if op == opExpire && w.expired == 0 {
		return errNoneExpired
	}
	if len(w.replaced) > 0 {
		return errReplacesExpired
	}
	return w.aggs.apply(b)
}

// errNoneExpired: a reaper's batch found none of its records expired any
// more (each written again since it was read). It is not committed: a
// commit would log a change-log entry of no records, which a replay could
// not apply.
var errNoneExpired = errors.New("no record of the batch is expired any more")

// change checks the i-th record of the batch, p, against old, the stored
// record it replaces (found), and writes into b what it changes but for
// its own new value: the record's removal, its index entries retracted
// and aggregate groups updated, its change-log entry.
func (w *Writer) change(b store.WriteBatch, i int, p *prep, old []byte, found, dups bool, pr batchProbe, logOn bool) error {
	// An expired record is absent: an insert replaces it (found still
	// retracts its index entries below); an update, patch or remove of it
	// is NOT_FOUND.
	live := found && !p.t.expired(old, w.now)
	if err := checkExistence(p.op, i, p, live); err != nil {
		return err
	}
	if found && !live && w.reapsFirst() { // an insert or upsert: the others failed above
		w.noteReplaced(p)
	}
	if p.op == OpPatch {
		if err := w.patchRecord(i, p, old); err != nil {
			return err
		}
	}
	if p.op != OpRemove {
		if err := w.checkUnique(i, p, dups, pr); err != nil {
			return err
		}
	}
	if len(p.t.aggs) > 0 {
		if err := w.noteAggregates(p, old, found); err != nil {
			return err
		}
	}
	if logOn {
		w.logChange(p.op, p, old, live)
	}
	if found && len(p.t.indexes) > 0 {
		if err := w.retract(b, p.op, p, old, dups); err != nil {
			return err
		}
	}
	if p.op == OpRemove {
		w.del(b, w.bytes(p.key), dups)
	}
	return nil
}

// batchProbe says which point reads of a batch can be skipped: when the
// store holds no key in the batch's record-key (or unique-key) range, no
// record of the batch exists yet (or holds one of its unique values).
type batchProbe struct {
	recsAbsent, uniqAbsent bool
}

// probe answers batchProbe with one iterator probe per range. Only inserts
// and upserts, which usually write new keys, try it.
func (w *Writer) probe(op Op) (batchProbe, error) {
	var pr batchProbe
	if op != OpInsert && op != OpUpsert {
		return pr, nil
	}
	var err error
	if pr.recsAbsent, err = w.absent(w.recMin, w.recMax); err != nil {
		return pr, err
	}
	if w.hasUniq {
		if pr.uniqAbsent, err = w.absent(w.uniqMin, w.uniqMax); err != nil {
			return pr, err
		}
	}
	return pr, nil
}

// existing reads the record p replaces, if any, as the batch has left it.
// An upsert of a type without indexes needs neither the old value nor its
// existence (unless the change log records it), and a key the probe proved
// new needs no read.
func (w *Writer) existing(op Op, p *prep, dups bool, pr batchProbe) (old []byte, found bool, err error) {
	if (op == OpUpsert && len(p.t.indexes) == 0 && len(p.t.aggs) == 0 && !w.e.clog.On()) || (pr.recsAbsent && !dups) {
		return nil, false, nil
	}
	return w.get(w.bytes(p.key), &w.oldBuf, dups, op == OpInsert)
}

// checkUnique is the uniqueness rule: each new unique index key must be
// free or already point at this record.
func (w *Writer) checkUnique(i int, p *prep, dups bool, pr batchProbe) error {
	if pr.uniqAbsent && !dups && len(w.ov) == 0 {
		return nil
	}
	pk := w.bytes(p.pk)
	for j, ix := range p.t.indexes {
		if !ix.ix.Unique {
			continue
		}
		for _, k := range w.entries(p, j) {
			cur, taken, err := w.get(w.bytes(k), &w.ixBuf, dups, true)
			if err != nil {
				return err
			}
			if taken && !bytes.Equal(cur, pk) {
				held, err := w.heldByLive(p, cur, dups)
				if err != nil {
					return err
				}
				if held {
					return uniqueError(i, p, j, w.bytes(k))
				}
				// p takes the value over from an expired record: a later
				// record of the batch, the expired one rewritten, must
				// read the entry as p's, not retract it as its own.
				w.ov[string(w.bytes(k))] = ovEntry{val: pk}
			}
		}
	}
	return nil
}

// heldByLive reports whether the record of t with primary key pk, which
// holds a unique value p wants, is live: an expired holder conflicts with
// nothing, and p's entry then takes the value over (retract leaves an
// entry alone once it points at another record).
func (w *Writer) heldByLive(p *prep, pk []byte, dups bool) (bool, error) {
	if p.t.exp == nil {
		return true, nil
	}
	k := append(append(make([]byte, 0, len(p.t.prefix)+len(pk)), p.t.prefix...), pk...)
	rec, found, err := w.get(k, &w.holdBuf, dups, false)
	if err != nil {
		return false, err
	}
	return !found || !p.t.expired(rec, w.now), nil
}

// retract deletes the index entries of old, the record p replaces (or
// removes), that the new record does not write again. The old record is
// walked once for all its index keys. A unique entry is deleted only while
// it points at this record: another record may have taken the value since.
func (w *Writer) retract(b store.WriteBatch, op Op, p *prep, old []byte, dups bool) error {
	t := p.t
	pk := w.bytes(p.pk)
	w.oldOcc = t.keys.locate(old, w.oldOcc[:0])
	for j, ix := range t.indexes {
		if t.keys.multi[j] >= 0 {
			if err := w.retractMulti(b, op, p, old, j, dups); err != nil {
				return err
			}
			continue
		}
		var err error
		if ix.ix.Unique {
			skip, err := t.keys.absent(old, w.oldOcc, j)
			if err != nil {
				return &apierror.Error{Code: apierror.Internal, Msg: "stored record of " + p.url + " unreadable: " + err.Error(), Err: err}
			}
			if skip {
				continue // it has no entry to retract
			}
		}
		w.oldIx = append(w.oldIx[:0], ix.prefix...)
		if w.oldIx, _, err = t.keys.appendIndex(w.oldIx, old, w.oldOcc, j); err != nil {
			return &apierror.Error{Code: apierror.Internal, Msg: "stored record of " + p.url + " unreadable: " + err.Error(), Err: err}
		}
		if !ix.ix.Unique {
			w.oldIx = append(w.oldIx, pk...)
		}
		if op != OpRemove && bytes.Equal(w.oldIx, w.bytes(w.ixOff[int(p.ix)+j])) {
			continue
		}
		if ix.ix.Unique {
			cur, ok, err := w.get(w.oldIx, &w.ixBuf, dups, false)
			if err != nil {
				return err
			}
			if !ok || !bytes.Equal(cur, pk) {
				continue
			}
		}
		w.delEntry(b, ix, w.oldIx, dups || ix.ix.Unique)
	}
	return nil
}

// put writes the new record and its index entries.
func (w *Writer) put(b store.WriteBatch, p *prep, dups bool) {
	w.set(b, w.bytes(p.key), p.value(), dups)
	for j := range p.t.indexes {
		w.putEntry(b, p, j, dups)
	}
}

// putEntry writes p's entry in its type's index j: a unique entry's value
// is the primary key, a non-unique entry's key ends with it.
func (w *Writer) putEntry(b store.WriteBatch, p *prep, j int, dups bool) {
	ix := p.t.indexes[j]
	var v []byte
	if ix.ix.Unique {
		v = w.bytes(p.pk)
	}
	for _, k := range w.entries(p, j) {
		w.setEntry(b, ix, w.bytes(k), v, dups)
	}
}

// putGrouped writes the batch's records, then the entries of each index
// in turn, for a batch whose writes may come in any order (see build).
// Keys of one kind are neighbours in the memtable (ascending ids, names
// of consecutive records), and Pebble's skiplist inserter starts each
// search from where the previous insert ended: one record's record key
// and index entries, interleaved, sent every search back to the top.
func (w *Writer) putGrouped(b store.WriteBatch) {
	most := 0
	for i := range w.preps {
		p := &w.preps[i]
		w.set(b, w.bytes(p.key), p.val, false)
		most = max(most, len(p.t.indexes))
	}
	for j := 0; j < most; j++ {
		if w.putSorted(b, j) {
			continue
		}
		for i := range w.preps {
			if p := &w.preps[i]; j < len(p.t.indexes) {
				w.putEntry(b, p, j, false)
			}
		}
	}
}

// logChange appends the change that record p made to the batch's log
// entry: old is the record it replaced or removed (found), as the batch
// left it. An upsert is logged as the insert or update it turned out to
// be.
func (w *Writer) logChange(op Op, p *prep, old []byte, found bool) {
	switch {
	case op == OpRemove:
		w.entry.Add(changelog.Remove, p.t.rt.ID, nil, old)
	case found:
		w.entry.Add(changelog.Update, p.t.rt.ID, p.value(), old)
	default:
		w.entry.Add(changelog.Insert, p.t.rt.ID, p.val, nil)
	}
}
