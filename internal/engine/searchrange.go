package engine

import (
	"context"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// A request of one query that is not a plain primary-key lookup (an index
// range, a scan, a filtered read), arriving while nothing else of its
// stream runs, is run by the receiving goroutine and written as wire
// bytes, as a request of lookups is (searchenc.go): each record is copied
// once, from the store's read into the response, which is sent from a
// buffer reused from response to response.
//
// On the message path such a query took a worker goroutine, its responses
// a sender goroutine, and each record an Any and a copy of its bytes in
// fresh memory: at 1,000 records a query, two goroutine wake-ups per
// query (on a machine whose idle core wakes 70–300 µs late, as long as
// the query itself) and about 250 bytes allocated per record, whose
// collections made the rate of one binary vary between runs by up to 2×.
// A client that pipelines single-query requests on one stream has them
// run one after another (as it has its lookups); queries of one request,
// or of requests sent while one runs elsewhere, still run in parallel.

// inlineQuery reports whether request qs can run on the receiving
// goroutine as one wire-written query (wireQuery).
func inlineQuery(qs []*pb.Query) bool {
	return len(qs) == 1 && qs[0] != nil && !qs[0].GetExplain()
}

// wireQuery runs query q, whose id is id, writing its responses as wire
// bytes and sending them with deliver, which reports whether the stream
// goes on. It keeps the message path's bounds and its responses' shape:
// each response holds a response's bytes of the result budget while it
// is built, and at most MaxResultRecords records and about MaxResultBytes;
// the bytes are proto.Marshal's encoding of the responses runChunk would
// send (TestWireQueryMatchesMessages).
func (e *Engine) wireQuery(ctx context.Context, q *pb.Query, id uint64, deliver func(b []byte, held int64) bool) bool {
	var start time.Time
	if e.opts.SlowQuery > 0 {
		start = time.Now()
	}
	e.stats.Queries.Add(1)
	r := &wireRun{e: e, ctx: ctx, deliver: deliver}
	r.w = lookupEncs.Get().(*lookupEnc)
	defer lookupEncs.Put(r.w)
	r.w.reset()
	defer r.close()
	r.query(q, id)
	if !r.flush() {
		return false
	}
	if e.opts.SlowQuery > 0 {
		e.logSlowSearch([]*pb.Query{q}, start)
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
