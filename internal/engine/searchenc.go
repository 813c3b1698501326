package engine

import (
	"context"
	"sync"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/recordcache"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/wire"
)

// A request of plain primary-key lookups run on the receiving goroutine,
// on a transport that sends wire bytes (WireSink, LookupWireSink), has its
// responses written as wire bytes straight from the records' bytes by
// internal/wire's search writers: each record is copied once, from the
// record cache's entry (or the store's read) into the response, with no
// ResultBatch, QueryDone or Any message built, sized and encoded per
// lookup. Those were a quarter of the server's CPU on batched lookups,
// and the packer's and encoder's copies of each record another tenth.
// The bytes are proto.Marshal's encoding of the response the message path
// builds (the writers are held to it by internal/wire's tests, the
// answers to the message path's by TestSearchWireMatchesMessages), so
// clients cannot tell the paths apart.

// maxKeptEnc bounds the buffers a lookupEnc keeps from one response to
// the next.
const maxKeptEnc = 512 << 10

// lookupEnc is one SearchResponse of point lookups being written: its
// results, completions and errors in three buffers, joined in field order
// (as proto.Marshal writes them) when it is done. It is reused from
// response to response by the request's goroutine (lookupEncs).
type lookupEnc struct {
	out   []byte // results; the response once finished
	dones []byte
	errs  []byte
	recs  int // records in the response
	bytes int // their bytes, counted as the message path counts them
	// A query's records may be written as one open ResultBatch
	// (record): its records follow wire.MaxResultHeader bytes left at
	// the start of out, where its header is written once its length is
	// known (closeBatch). The response then starts at out[head:].
	open   bool
	openID uint64
	head   int
}

// lookupEncs pools the engine's lookupEncs, so that their buffers follow
// the requests running, not the streams open (a stream opened for a few
// requests would grow new ones each time); idle ones go with the GC.
var lookupEncs = sync.Pool{New: func() any { return new(lookupEnc) }}

func (w *lookupEnc) empty() bool { return len(w.out) == 0 && len(w.dones) == 0 && len(w.errs) == 0 }

// result adds query id's one record, rec, of a type whose encoded
// Any.type_url field is urlField (recType.urlField).
func (w *lookupEnc) result(id uint64, urlField, rec []byte) {
	w.out = wire.AppendResult(w.out, id, urlField, rec)
	w.recs++
	w.bytes += resultBytes(len(rec), len(urlField))
}

// done adds query id's completion with count matches.
func (w *lookupEnc) done(id, count uint64) { w.dones = wire.AppendDone(w.dones, id, count) }

// fail adds a query's error.
func (w *lookupEnc) fail(qe *pb.QueryError) { w.errs = wire.AppendQueryError(w.errs, qe) }

// finish returns the response's bytes, valid until the next reset.
func (w *lookupEnc) finish() []byte {
	w.closeBatch()
	w.out = append(append(w.out, w.dones...), w.errs...)
	return w.out[w.head:]
}

// record adds one of query id's records, rec, of type t, to the
// response's one open batch, counting its bytes as runChunk does. A
// response holds a batch of one query only, and nothing else in out:
// record is only called on a response that is empty or has an open batch
// of the same query.
func (w *lookupEnc) record(id uint64, t *recType, rec []byte) {
	if !w.open {
		var gap [wire.MaxResultHeader]byte
		w.out = append(w.out[:0], gap[:]...)
		w.open, w.openID = true, id
	}
	w.out = wire.AppendRecord(w.out, t.urlField, rec)
	w.recs++
	w.bytes += resultBytes(len(rec), len(t.url))
}

// closeBatch writes the open batch's header, if any, right before its
// records: the response starts there.
func (w *lookupEnc) closeBatch() {
	if !w.open {
		return
	}
	w.open = false
	var h [wire.MaxResultHeader]byte
	hb := wire.AppendResultHeader(h[:0], w.openID, len(w.out)-wire.MaxResultHeader)
	w.head = wire.MaxResultHeader - len(hb)
	copy(w.out[w.head:], hb)
}

// reset starts the next response, keeping the buffers unless large.
func (w *lookupEnc) reset() {
	for _, b := range []*[]byte{&w.out, &w.dones, &w.errs} {
		if cap(*b) > maxKeptEnc {
			*b = nil
		}
		*b = (*b)[:0]
	}
	w.recs, w.bytes = 0, 0
	w.open, w.head = false, 0
}

// wireLookups runs a request of n plain primary-key lookups (their keys
// in buf, from allPoints or wirePoints) whose first query has id first,
// writing its responses as wire bytes and sending them with deliver, which
// reports whether the stream goes on. It keeps the message path's bounds:
// each response holds a response's bytes of the result budget while it is
// built, and at most MaxResultRecords records and about MaxResultBytes.
func (e *Engine) wireLookups(ctx context.Context, n int, first uint64, buf *lookupBuf, deliver func(b []byte, h Hold) bool) bool {
	points := buf.points
	buf.ready = false
	e.stats.Queries.Add(uint64(n))
	r := &wireRun{e: e, ctx: ctx, deliver: deliver, staged: e.stageLookups(points, buf)}
	r.w = lookupEncs.Get().(*lookupEnc)
	defer lookupEncs.Put(r.w)
	r.w.reset()
	defer r.close()
	if len(points) > 1 && e.st.Shared() {
		// Each lookup would be a round trip: read them together.
		r.pitGen, r.pit = e.cache.Gen(), e.prefetch(points)
	}
	for k := range points {
		p := &points[k]
		id := first + uint64(p.i)
		if !r.reserve(id) {
			if ctx.Err() != nil {
				return false
			}
			continue
		}
		val, ok, err := r.read(k, p.key)
		switch {
		case err != nil:
			r.fail(id, err)
			continue
		case !ok || p.t.exp != nil && p.t.expired(val, r.now()):
			r.w.done(id, 0)
			continue
		}
		r.found++
		if !p.count {
			if p.keysOnly {
				r.keys = record.AppendFields(r.keys[:0], val, p.t.pkNums)
				val = r.keys
			}
			w := r.w
			if w.recs >= e.opts.MaxResultRecords || w.bytes+len(val) > e.opts.MaxResultBytes && w.recs > 0 {
				if !r.flush() {
					return false
				}
				if !r.reserve(id) {
					if ctx.Err() != nil {
						return false
					}
					continue
				}
			}
			if !r.cover(id, resultBytes(len(val), len(p.t.urlField))) {
				if ctx.Err() != nil {
					return false
				}
				continue
			}
			w.result(id, p.t.urlField, val)
		}
		r.w.done(id, 1)
	}
	e.stats.PointLookups.Add(uint64(len(points)))
	e.stats.RecordsRead.Add(r.found)
	if !r.flush() {
		return false
	}
	e.noteMisses(r.misses, len(points))
	return ctx.Err() == nil
}

// wireRun is the state of one wireLookups call.
type wireRun struct {
	e       *Engine
	ctx     context.Context
	deliver func(b []byte, h Hold) bool
	w       *lookupEnc
	staged  *recordcache.Batch // the cache's answers, nil for a lone lookup
	// h is what the response being written holds of the result budget.
	h hold
	// pit reads the lookups the cache misses, made on the first;
	// pitGen is the cache generation taken before it was made.
	pit           store.Iterator
	pitGen        uint64
	dst, keys     []byte
	found, misses uint64
	// clock is the time expiries are compared with, read once the first
	// record of a type with an expiry is (clocked says it was).
	clock   instant
	clocked bool
	// access is the access path of the lone query run (wireQuery), and
	// times when it started and was planned.
	access query.Access
	times  searchTimes
}

// now returns the time the run's records' expiries are compared with:
// a clock read is not free, and most types have no expiry.
func (r *wireRun) now() instant {
	if !r.clocked {
		r.clock, r.clocked = r.e.now(), true
	}
	return r.clock
}

// reserve makes the response hold a full response's bytes of the result
// budget; on failure query id fails alone (or the stream is over: ctx).
func (r *wireRun) reserve(id uint64) bool {
	if err := r.e.reserve(r.ctx, &r.h); err != nil {
		if r.ctx.Err() == nil {
			r.fail(id, err)
		}
		return false
	}
	return true
}

// cover makes the response hold room for a record of size bytes (see
// resultBytes) before it is copied in; on failure query id fails alone
// (or the stream is over: ctx).
func (r *wireRun) cover(id uint64, size int) bool {
	if err := r.e.cover(r.ctx, &r.h, int64(r.w.bytes+size), r.w.recs == 0); err != nil {
		if r.ctx.Err() == nil {
			r.fail(id, err)
		}
		return false
	}
	return true
}

func (r *wireRun) fail(id uint64, err error) {
	r.e.stats.QueryErrors.Add(1)
	r.w.fail(queryError(id, storeError(err)))
}

// read returns the record of lookup k, key: from the cache, else from the
// store (and offers it to the cache).
func (r *wireRun) read(k int, key []byte) ([]byte, bool, error) {
	e := r.e
	var val []byte
	var ok bool
	// Either way the record is the cache's own entry, not a copy: the
	// response copies it, and nothing writes it.
	if r.staged != nil {
		val, ok = r.staged.Val(k)
	} else {
		val, ok = e.cache.View(key)
	}
	if ok {
		return val, true, nil
	}
	r.misses++
	if r.pit == nil {
		r.pitGen = e.cache.Gen()
		pit, err := e.st.NewIterator(nil, nil)
		if err != nil {
			return nil, false, err
		}
		r.pit = pit
	}
	val, ok, err := r.pit.Lookup(key, r.dst[:0])
	if err != nil {
		return nil, false, err
	}
	r.dst = val
	if ok {
		e.cache.Fill(key, val, r.pitGen)
	}
	return val, ok, nil
}

// flush sends the response written so far, if any.
func (r *wireRun) flush() bool {
	w := r.w
	if w.empty() {
		return true
	}
	ok := r.deliver(w.finish(), r.e.take(&r.h, w.bytes)) // deliver gives it back, sent or not
	w.reset()
	return ok
}

// close gives back what an unsent response held and the iterator.
func (r *wireRun) close() {
	if r.pit != nil {
		r.pit.Close()
	}
	r.e.release(&r.h)
}
