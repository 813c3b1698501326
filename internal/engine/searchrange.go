package engine

import (
	"context"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// A request of one query that is not a plain primary-key lookup (an index
// range, a scan, a filtered read) runs on a worker that writes its
// responses as wire bytes, as a request of lookups is written
// (searchenc.go), and sends them itself: each record is copied once, from
// the store's read into the response, which is sent from a buffer reused
// from response to response.
//
// On the message path such a query's worker built an Any and a copy of
// the record's bytes in fresh memory per record, and handed each response
// to the stream's sender goroutine, which encoded it again: about 250
// bytes allocated per record, whose collections made the rate of one
// binary vary between runs by up to 2×, and a second goroutine wake-up
// per response (on a machine whose idle core wakes 70–300 µs late). The
// query still runs on a worker, not on the receiving goroutine, so that a
// long one does not hold up the requests sent after it on the stream.

// loneQuery reports whether request qs is one query that wireQuery
// can run.
func loneQuery(qs []*pb.Query) bool {
	return len(qs) == 1 && qs[0] != nil && !qs[0].GetExplain() && !qs[0].GetVersions()
}

// wireQuery runs query q, whose id is id, writing its responses as wire
// bytes and sending them with deliver, which reports whether the stream
// goes on. It keeps the message path's bounds and its responses' shape:
// each response holds a response's bytes of the result budget while it
// is built, and at most MaxResultRecords records and about MaxResultBytes;
// the bytes are proto.Marshal's encoding of the responses runChunk would
// send (TestWireQueryMatchesMessages).
func (e *Engine) wireQuery(ctx context.Context, q *pb.Query, id uint64, deliver func(b []byte, h Hold) bool) bool {
	e.stats.Queries.Add(1)
	r := &wireRun{e: e, ctx: ctx, deliver: deliver}
	r.w = lookupEncs.Get().(*lookupEnc)
	defer lookupEncs.Put(r.w)
	r.w.reset()
	defer r.close()
	r.times = e.searchStart()
	r.query(q, id)
	if !r.flush() {
		return false
	}
	if !r.times.planned.IsZero() { // a query that did not compile has no access path
		e.observeSearch(ctx, r.access, 1, r.times)
	}
	if e.opts.SlowQuery > 0 {
		e.logSlowSearch([]*pb.Query{q}, r.times.start)
	}
	return ctx.Err() == nil
}

// query runs q (id id) into the run's responses, flushing full ones.
func (r *wireRun) query(q *pb.Query, id uint64) {
	e := r.e
	c, err := e.compile(q)
	if err != nil {
		r.fail(id, err)
		return
	}
	r.access = c.plan.Access
	r.times.plannedNow()
	if !r.reserve(id) {
		return // failed (reserve says why), or the stream is over
	}
	cu := &cursor{e: e, c: c}
	defer cu.flushStats()
	var done func()
	if cu.r, done, err = e.reader(c); err != nil {
		r.fail(id, err)
		return
	}
	over := false // the query has failed or the stream is over
	err = cu.run(r.ctx, c.plan.Ranges, nil, func(_, rec []byte) bool {
		if c.plan.Count {
			return true
		}
		w := r.w
		if w.recs >= e.opts.MaxResultRecords || w.bytes+len(rec) > e.opts.MaxResultBytes && w.recs > 0 {
			if !r.flush() || !r.reserve(id) {
				over = true
				return false
			}
		}
		if !r.cover(id, resultBytes(len(rec), len(c.t.url))) {
			over = true
			return false
		}
		w.record(id, c.t, rec)
		return true
	})
	done()
	switch {
	case over:
	case err != nil:
		if r.ctx.Err() == nil {
			r.fail(id, err)
		}
	default:
		r.w.done(id, cu.n)
	}
}
