package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/store"
)

// The defaults of Options.ReapInterval and ReapBatch.
const (
	DefaultReapInterval = time.Second
	DefaultReapBatch    = 1000
)

// sharedReapOps is the operations a reaper batch on a shared store aims
// at: within etcd's default --max-txn-ops of 128, with room for the
// batch's own comparisons.
const sharedReapOps = 100

// testHookReapBatch, when set by a test, runs before each reaper batch
// is applied, with the records it found expired: a write the hook makes
// races the batch.
var testHookReapBatch func(recs []*anypb.Any)

// reapEvery runs the reaper until the engine closes: every interval, one
// pass over the types whose records expire (Reap).
func (e *Engine) reapEvery(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-e.bgCtx.Done():
			return
		case <-t.C:
		}
		if _, err := e.Reap(e.bgCtx); err != nil && e.bgCtx.Err() == nil {
			e.log.Warn("reaper pass failed", "err", err)
		}
	}
}

// Reap deletes the records that have expired by now, type by type, in
// batches of at most Options.ReapBatch records, and returns how many it
// deleted. Each batch goes through the write path like a remove (index
// entries, change log), with one difference: a record is deleted only if
// it has still expired when the batch commits, so an update that moved
// its expiry later wins. Other writers' batches take turns with the
// reaper's between batches. A type whose expiry index is still being built
// is left for a later pass.
//
// Servers sharing a store may reap at once: both may read the same
// records, and the batch that commits second finds them gone and skips
// them.
func (e *Engine) Reap(ctx context.Context) (int, error) {
	cat := e.cat.Load()
	names := make([]string, 0, len(cat.types))
	for name, t := range cat.types {
		if ix := t.expiryIndex(); ix != nil && !ix.building {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	total := 0
	var errs []error
	for _, name := range names {
		// A type that fails keeps no other type's records from reaping.
		n, err := e.reapType(ctx, cat.types[name])
		total += n
		if err != nil {
			if ctx.Err() != nil {
				return total, err
			}
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// expiryIndex returns the maintained expiry index of t, nil when t has
// none (no ttl option, or its build failed).
func (t *recType) expiryIndex() *index {
	for _, ix := range t.indexes {
		if ix.ix.Expiry {
			return ix
		}
	}
	return nil
}

// reapType deletes the expired records of t, batch by batch, from the
// oldest expiry on. The time is taken once: records expiring during the
// pass wait for the next one, so a pass ends.
func (e *Engine) reapType(ctx context.Context, t *recType) (int, error) {
	r := t.expiredRange(e.now())
	w := e.NewWriter()
	defer w.Close()
	size := e.reapBatchSize(t)
	total := 0
	after := []byte(nil)
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		recs, last, more, err := e.collectExpired(t, &r, after, size, e.opts.MaxInflightBytes/4)
		if err != nil {
			return total, fmt.Errorf("reap %s: %w", t.rt.Name, err)
		}
		if len(recs) > 0 {
			if testHookReapBatch != nil {
				testHookReapBatch(recs)
			}
			if err := e.expireBatch(ctx, w, t, recs); err != nil {
				if errors.Is(err, store.ErrLimit) && size > 1 {
					// More index entries than the estimate (repeated
					// fields): smaller batches, from the same place.
					size /= 2
					continue
				}
				return total, fmt.Errorf("reap %s: %w", t.rt.Name, err)
			}
			total += w.expired
		}
		if !more {
			_, err := w.Sync()
			return total, err
		}
		after = last
		// Let the writers waiting for the lock and the disk go first.
		runtime.Gosched()
	}
}

// reapBatchSize is the records of t in one reaper's batch.
func (e *Engine) reapBatchSize(t *recType) int {
	size := min(e.opts.ReapBatch, e.opts.MaxRecordsPerBatch)
	if e.st.Shared() {
		// A batch is one etcd transaction: a comparison and a deletion
		// per record and one deletion per index entry, within the
		// cluster's --max-txn-ops (128 by default).
		size = min(size, max(1, sharedReapOps/(2+len(t.indexes))))
	}
	return size
}

// reapRange is where the expired records of a type lie in its expiry
// index: every entry below the key of now, but for those of the zero
// expiry (records that never expire), which sort among them.
type reapRange struct {
	ix *index
	x  *expiry
	// lower is the index's first key; zero and zeroEnd bound the entries
	// of the zero expiry; upper is past the last entry at or before now.
	lower, zero, zeroEnd, upper []byte
}

// expiredRange is where the records of t expired at now lie in its expiry
// index (which t has).
func (t *recType) expiredRange(now instant) reapRange {
	r := reapRange{ix: t.expiryIndex(), x: t.exp}
	r.bounds(now)
	return r
}

// neverExpires reports whether expiry index entry k is one of a record
// that never expires (the zero expiry).
func (r *reapRange) neverExpires(k []byte) bool {
	return string(k) >= string(r.zero) && string(k) < string(r.zeroEnd)
}

// bounds sets the range for the time now.
func (r *reapRange) bounds(now instant) {
	p := r.ix.prefix
	r.lower = p
	r.zero = r.x.appendKey(slices.Clip(p), instant{})
	r.zeroEnd = keyspace.PrefixEnd(r.zero)
	r.upper = keyspace.PrefixEnd(r.x.appendKey(slices.Clip(p), now))
}

// appendKey appends the expiry index key of the instant at: the last key
// of the entries of records expiring at it, but for their primary keys.
// An integer field's value is the last one that expires at or before at.
func (x *expiry) appendKey(dst []byte, at instant) []byte {
	if x.nanos != nil {
		return orderedcode.AppendInt(orderedcode.AppendInt(dst, at.sec), at.nsec)
	}
	v := at.sec
	if x.unit == pbMillis {
		v = at.sec*1000 + at.nsec/1e6
	}
	if unsignedKind(x.field.Field().Kind()) {
		return orderedcode.AppendUint(dst, uint64(max(v, 0)))
	}
	return orderedcode.AppendInt(dst, v)
}

// collectExpired reads up to size expired records of t whose expiry index
// entries come after the entry after (from the first when nil), and of
// at most most bytes but for the first (a batch's bytes count against the
// in-flight limit, which a batch of large records would pass), and
// returns them with the last entry read and whether entries are left.
func (e *Engine) collectExpired(t *recType, r *reapRange, after []byte, size int, most int64) (recs []*anypb.Any, last []byte, more bool, err error) {
	it, err := e.st.NewIterator(r.lower, r.upper)
	if err != nil {
		return nil, nil, false, err
	}
	defer it.Close()
	ok := it.First()
	if after != nil {
		ok = it.SeekGE(append(slices.Clip(after), 0))
	}
	var prev []byte
	var recBytes int64
	now := e.now()
	for ; ok; ok = it.Next() {
		if len(recs) == size {
			return recs, last, true, it.Error()
		}
		k := it.Key()
		if r.neverExpires(k) {
			if ok = it.SeekGE(r.zeroEnd); !ok {
				break
			}
			k = it.Key()
		}
		prev, last = last, prev
		last = append(last[:0], k...)
		pk, err := r.x.pkOfEntry(k[len(r.ix.prefix):])
		if err != nil {
			continue // the checker reports a malformed entry
		}
		key := append(slices.Clip(t.prefix), pk...)
		val, found, err := e.st.Get(key, nil)
		if err != nil {
			return nil, nil, false, err
		}
		if !found || !t.expired(val, now) {
			continue
		}
		n := int64(len(val) + len(t.url))
		if recBytes+n > most && len(recs) > 0 {
			return recs, prev, true, it.Error() // the next batch starts at this entry
		}
		recBytes += n
		recs = append(recs, &anypb.Any{TypeUrl: t.url, Value: val})
	}
	return recs, last, false, it.Error()
}

// pkOfEntry returns the primary key at the end of an expiry index entry,
// given the entry without the index's prefix.
func (x *expiry) pkOfEntry(b []byte) ([]byte, error) {
	var err error
	if unsignedKind(x.field.Field().Kind()) {
		_, b, err = orderedcode.DecodeUint(b)
	} else {
		_, b, err = orderedcode.DecodeInt(b)
	}
	if err == nil && x.nanos != nil {
		_, b, err = orderedcode.DecodeInt(b)
	}
	return b, err
}

// ReaperLag returns how long ago the oldest expiry not yet reaped passed,
// over every type whose records expire: 0 when every expired record is
// gone.
func (e *Engine) ReaperLag() (time.Duration, error) {
	now := e.now()
	var lag time.Duration
	for _, t := range e.cat.Load().types {
		if t.expiryIndex() == nil {
			continue
		}
		r := t.expiredRange(now)
		at, ok, err := e.oldestExpiry(&r)
		if err != nil {
			return 0, err
		}
		if ok {
			lag = max(lag, time.Duration(now.sec-at.sec)*time.Second+time.Duration(now.nsec-at.nsec))
		}
	}
	return lag, nil
}

// oldestExpiry returns the earliest expiry at or before now in r's index.
func (e *Engine) oldestExpiry(r *reapRange) (instant, bool, error) {
	it, err := e.st.NewIterator(r.lower, r.upper)
	if err != nil {
		return instant{}, false, err
	}
	defer it.Close()
	ok := it.First()
	if ok && r.neverExpires(it.Key()) {
		ok = it.SeekGE(r.zeroEnd)
	}
	if !ok {
		return instant{}, false, it.Error()
	}
	at, err := r.x.ofEntry(it.Key()[len(r.ix.prefix):])
	return at, err == nil, nil
}

// ofEntry returns the expiry an expiry index entry holds, given the entry
// without the index's prefix.
func (x *expiry) ofEntry(b []byte) (instant, error) {
	if x.nanos != nil {
		sec, rest, err := orderedcode.DecodeInt(b)
		if err != nil {
			return instant{}, err
		}
		nsec, _, err := orderedcode.DecodeInt(rest)
		return instant{sec, nsec}, err
	}
	if unsignedKind(x.field.Field().Kind()) {
		v, _, err := orderedcode.DecodeUint(b)
		return x.ofUint(v), err
	}
	v, _, err := orderedcode.DecodeInt(b)
	return x.ofInt(v), err
}

// expire is the reaper's delete of p: the record goes, with its index
// entries, only if it exists and has expired at the batch's time, read
// under the write lock (on a shared store the read is one of the
// transaction's comparisons). An update that moved its expiry later, or a
// remove, came first: p is skipped and nothing of it is written.
func (w *Writer) expire(b store.WriteBatch, p *prep, old []byte, found, dups, logOn bool) error {
	if !found || !p.t.expired(old, w.now) {
		return nil
	}
	if logOn {
		w.entry.Add(changelog.Expire, p.t.rt.ID, nil, old)
	}
	if len(p.t.aggs) > 0 {
		if err := w.noteAggregates(p, old, true); err != nil {
			return err
		}
	}
	if len(p.t.indexes) > 0 {
		if err := w.retract(b, OpRemove, p, old, dups); err != nil {
			return err
		}
	}
	w.del(b, w.bytes(p.key), dups)
	if w.expired == 0 && w.e.st.Shared() {
		b.Set(keyExpiryMark, nil)
	}
	w.expired++
	return nil
}
