package engine

import (
	"context"
	"errors"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/store"
)

// An insert or upsert whose key holds an expired record the reaper has
// not deleted yet replaces it, as if it were absent. Were the write to
// take the key in place, the record's expiry would never reach the change
// feed: on Pebble the log would show an insert out of nowhere, on etcd
// (whose feed is the store's own revisions) an update of a record that
// had expired. So the writer first deletes such records as the reaper
// does, in batches of its own through the reaper's path (each a remove
// marked expired, with its index entries and aggregates), and then
// applies the write, which now finds the key free. A replay applies each
// logged entry as one commit and so replaces in place, as does the last
// of maxReapFirst tries (a record written meanwhile, expired already,
// lets a write through rather than keep it waiting).

// errReplacesExpired: the batch built would replace expired records
// (Writer.replaced) that the change feed has not seen expire.
var errReplacesExpired = errors.New("the batch replaces expired records not yet reaped")

// maxReapFirst bounds how often one batch reaps the expired records it
// replaces before it replaces them in place.
const maxReapFirst = 3

// replacedRec is a record of the batch whose key holds an expired record:
// its key fields, all the reaper's batch needs, so that batch holds little
// of the write budget the batch itself already holds.
type replacedRec struct {
	t   *recType
	rec *anypb.Any
}

// reapsFirst says whether the batch being built reaps the expired records
// it would replace before it writes: when a change feed can show the
// expiry, and not on a replay.
func (w *Writer) reapsFirst() bool {
	return w.reapFirst && (w.e.clog.On() || w.e.st.Shared())
}

// noteReplaced notes that p, an insert or upsert, replaces an expired
// record; the build then ends with errReplacesExpired.
func (w *Writer) noteReplaced(p *prep) {
	key := record.AppendFields(nil, p.val, p.t.pkNums)
	w.replaced = append(w.replaced, replacedRec{t: p.t, rec: &anypb.Any{TypeUrl: p.t.url, Value: key}})
}

// commitReapingFirst commits the batch into b, first reaping the expired
// records it would replace (up to maxReapFirst times).
func (w *Writer) commitReapingFirst(ctx context.Context, b store.WriteBatch, cat *catalog, op Op, recs []*anypb.Any, dups bool) error {
	for try := 1; ; try++ {
		w.reapFirst = !w.replaceInPlace && try < maxReapFirst
		clear(w.replaced)
		w.replaced = w.replaced[:0]
		var err error
		if w.e.st.Shared() {
			err = w.commitShared(b, cat, op, recs, dups) // pipelined: sharedwrite.go
		} else {
			err = w.commitLocked(b, cat, op, recs, dups)
		}
		if !errors.Is(err, errReplacesExpired) {
			return err
		}
		b.Reset()
		if err := w.reapReplaced(ctx); err != nil {
			return err
		}
		// The catalog may have changed meanwhile: the commit prepares
		// again when it did.
	}
}

// reapReplaced deletes the expired records w.replaced names, a type at a
// time, on a writer of its own, whose batches are durable before the
// writes that follow them on this one (the store's prefix durability).
func (w *Writer) reapReplaced(ctx context.Context) error {
	if w.reaper == nil {
		w.reaper = w.e.NewWriter()
	}
	for len(w.replaced) > 0 {
		t := w.replaced[0].t
		var recs []*anypb.Any
		rest := w.replaced[:0]
		for _, r := range w.replaced {
			if r.t == t {
				recs = append(recs, r.rec)
			} else {
				rest = append(rest, r)
			}
		}
		w.replaced = rest
		if err := w.e.expireRecords(ctx, w.reaper, t, recs); err != nil {
			return err
		}
	}
	return nil
}

// expireRecords deletes those of recs (records of t, or records naming
// their keys) that have expired, in the reaper's batches on w; smaller
// batches when a batch passes the store's limits.
func (e *Engine) expireRecords(ctx context.Context, w *Writer, t *recType, recs []*anypb.Any) error {
	size := e.reapBatchSize(t)
	for len(recs) > 0 {
		n := min(size, len(recs))
		if err := e.expireBatch(ctx, w, t, recs[:n]); err != nil {
			if errors.Is(err, store.ErrLimit) && n > 1 {
				size = n / 2
				continue
			}
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// expireBatch applies one reaper's batch of records of t on w and counts
// the records it deleted.
func (e *Engine) expireBatch(ctx context.Context, w *Writer, t *recType, recs []*anypb.Any) error {
	if err := w.Apply(ctx, Batch{Op: opExpire, Records: recs}); err != nil {
		return err
	}
	e.stats.addExpired(t.rt.Name, w.expired)
	return nil
}
