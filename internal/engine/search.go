package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/store"
)

// Search serves one Search stream. recv returns the next request (io.EOF
// when the client is done); send sends one response and is only called
// from one goroutine at a time.
//
// A query's id is its ordinal on the stream. The queries of a request are
// cut into chunks run by a bounded pool of workers; a worker runs its
// chunk's queries in order and packs their results, completions and errors
// into responses bounded by MaxResultRecords and MaxResultBytes, so a batch
// of point lookups travels back in a few messages, not one per query. A
// failing query reports its error alone; the stream goes on.
//
// Flow control: responses pass through a small channel to the one sender;
// when the client reads slowly, send blocks, the channel fills, workers
// block, the pool stays full and recv is not called, so the client's own
// sends block on HTTP/2 flow control. Memory stays bounded by the pool size
// times the response bound.
func (e *Engine) Search(ctx context.Context, recv func() (*pb.SearchRequest, error), send func(*pb.SearchResponse) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := e.opts.SearchWorkers
	out := make(chan *pb.SearchResponse, workers)
	var sendErr error
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for resp := range out {
			if sendErr != nil {
				continue // drain so workers never block after a failed send
			}
			if err := send(resp); err != nil {
				sendErr = err
				cancel()
			}
		}
	}()

	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	var next uint64
	var err error
	for {
		var req *pb.SearchRequest
		req, err = recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			break
		}
		qs := req.GetQueries()
		// Enough chunks to keep every worker busy, not so many that a
		// batch of point lookups pays per-goroutine costs per query.
		size := max(1, (len(qs)+workers-1)/workers)
		for start := 0; start < len(qs); start += size {
			chunk := qs[start:min(start+size, len(qs))]
			id := next + uint64(start)
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				e.runChunk(ctx, chunk, id, out)
			}()
		}
		next += uint64(len(qs))
		if ctx.Err() != nil {
			break
		}
	}
	wg.Wait()
	close(out)
	<-sent
	if err != nil {
		return err
	}
	if sendErr != nil {
		return sendErr
	}
	return ctx.Err()
}

// responder packs results into bounded responses.
type responder struct {
	e     *Engine
	out   chan<- *pb.SearchResponse
	ctx   context.Context
	resp  *pb.SearchResponse
	recs  int
	bytes int
	// Slabs: a batch of point lookups makes per query an Any, a
	// ResultBatch, its one-element record list and a QueryDone; taking them
	// from arrays makes that one allocation per 64 queries, not four per
	// query. Messages handed out are never reused.
	slab    []anypb.Any
	batches []pb.ResultBatch
	dones   []pb.QueryDone
	ptrs    []*anypb.Any
	queries int // of the chunk: slabs need not outgrow it
}

func (r *responder) slabSize() int { return min(64, max(r.queries, 1)) }

func (r *responder) flush() bool {
	if r.resp == nil {
		return true
	}
	select {
	case r.out <- r.resp:
	case <-r.ctx.Done():
		return false
	}
	r.resp, r.recs, r.bytes = nil, 0, 0
	return true
}

func (r *responder) cur() *pb.SearchResponse {
	if r.resp == nil {
		r.resp = &pb.SearchResponse{}
	}
	return r.resp
}

// any returns a fresh Any from a slab: one allocation per 64 results.
func (r *responder) any(url string, val []byte) *anypb.Any {
	if len(r.slab) == 0 {
		r.slab = make([]anypb.Any, r.slabSize())
	}
	a := &r.slab[0]
	r.slab = r.slab[1:]
	a.TypeUrl = url
	a.Value = val
	return a
}

func (r *responder) batch(id uint64) *pb.ResultBatch {
	if len(r.batches) == 0 {
		r.batches = make([]pb.ResultBatch, r.slabSize())
	}
	b := &r.batches[0]
	r.batches = r.batches[1:]
	b.Query = id
	return b
}

func (r *responder) done(id, count uint64) *pb.QueryDone {
	if len(r.dones) == 0 {
		r.dones = make([]pb.QueryDone, r.slabSize())
	}
	d := &r.dones[0]
	r.dones = r.dones[1:]
	d.Query, d.Count = id, count
	return d
}

// first returns a record list holding a; its capacity is 1, so appending a
// second record moves the list off the slab instead of overwriting it.
func (r *responder) first(a *anypb.Any) []*anypb.Any {
	if len(r.ptrs) == 0 {
		r.ptrs = make([]*anypb.Any, r.slabSize())
	}
	l := r.ptrs[:1:1]
	r.ptrs = r.ptrs[1:]
	l[0] = a
	return l
}

func (e *Engine) runChunk(ctx context.Context, qs []*pb.Query, first uint64, out chan<- *pb.SearchResponse) {
	r := &responder{e: e, out: out, ctx: ctx, queries: len(qs)}
	var vals []byte // one buffer for the values of the current response
	var scratch pointScratch
	var pit *store.Iter // shared by lone point lookups, made on first use
	cu := &cursor{e: e} // reused: its buffers outlive each query
	e.stats.Queries.Add(uint64(len(qs)))
	points, rest := e.lookupOrder(qs)
	for k := range qs {
		var i int
		var c *compiled
		var err error
		if k < len(points) {
			p := &points[k]
			i = p.i
			c = scratch.point(p.t, p.key, qs[i])
		} else {
			i = rest[k-len(points)]
			c, err = e.compile(qs[i])
		}
		q := qs[i]
		id := first + uint64(i)
		if err != nil {
			e.stats.QueryErrors.Add(1)
			r.cur().Errors = append(r.cur().Errors, queryError(id, err))
			continue
		}
		cu.c, cu.n, cu.pit = c, 0, nil
		done := func() {}
		if c.plan.Access == query.AccessPKPoint && len(c.plan.Ranges) == 1 {
			// Lone point lookups share one iterator per chunk: each still
			// reads one consistent state, the iterator's, fixed after the
			// request arrived.
			if pit == nil {
				if pit, err = e.st.NewIter(nil, nil); err != nil {
					e.stats.QueryErrors.Add(1)
					r.cur().Errors = append(r.cur().Errors, queryError(id, err))
					continue
				}
				defer pit.Close()
			}
			cu.r, cu.pit = e.st, pit
		} else {
			cu.r, done = e.reader(c)
		}
		var batch *pb.ResultBatch
		explained := false
		err = cu.run(ctx, c.plan.Ranges, nil, func(_, rec []byte) bool {
			if c.plan.Count {
				return true
			}
			if r.recs >= e.opts.MaxResultRecords || r.bytes+len(rec) > e.opts.MaxResultBytes && r.recs > 0 {
				if !r.flush() {
					return false
				}
				batch = nil
				vals = nil
			}
			if batch == nil {
				batch = r.batch(id)
				if q.GetExplain() && !explained {
					batch.Plan = c.plan.Explain()
					explained = true
				}
				resp := r.cur()
				resp.Results = append(resp.Results, batch)
			}
			// Values share one buffer per response; a new buffer starts
			// when it would move (earlier slices stay valid). It is sized
			// for what this chunk can still return, so a lone lookup does
			// not pay for a 64 KiB buffer.
			if cap(vals)-len(vals) < len(rec) {
				guess := 64 << 10 // a range: expect many records
				if c.plan.Access == query.AccessPKPoint {
					guess = len(rec) * (len(qs) - k + len(c.plan.Ranges))
				}
				vals = make([]byte, 0, min(max(guess, len(rec)), max(64<<10, len(rec))))
			}
			start := len(vals)
			vals = append(vals, rec...)
			a := r.any(c.t.url, vals[start:len(vals):len(vals)])
			if batch.Records == nil {
				batch.Records = r.first(a)
			} else {
				batch.Records = append(batch.Records, a)
			}
			r.recs++
			r.bytes += len(rec) + len(c.t.url) + 8
			return true
		})
		done()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.stats.QueryErrors.Add(1)
			r.cur().Errors = append(r.cur().Errors, queryError(id, err))
			batch = nil
			continue
		}
		d := r.done(id, cu.n)
		if q.GetExplain() && !explained {
			d.Plan = c.plan.Explain()
		}
		r.cur().Done = append(r.cur().Done, d)
		batch = nil
	}
	r.flush()
}

// pointJob is a plain primary-key lookup of a chunk: query i of the chunk
// reads record key key of type t.
type pointJob struct {
	i   int
	t   *recType
	key []byte
}

// lookupOrder splits a chunk's queries into plain primary-key lookups,
// with their keys encoded once (query.Point) and sorted, and the rest, in
// arrival order, which need the planner. Sorted, the lookups move one
// iterator forward through the store, so Pebble continues from where the
// previous seek ended instead of descending from the top
// (TrySeekUsingNext) and often finds the next key in a block it already
// holds. Results are keyed by query id, so the order in which queries
// finish is the server's to choose.
func (e *Engine) lookupOrder(qs []*pb.Query) (points []pointJob, rest []int) {
	if e.closed.Load() {
		rest = make([]int, len(qs)) // compile reports the closed engine
		for i := range rest {
			rest[i] = i
		}
		return nil, rest
	}
	cat := e.cat.Load()
	var arena []byte // every key; sliced once complete, as appends move it
	ends := make([]int, 0, len(qs))
	points = make([]pointJob, 0, len(qs))
	for i, q := range qs {
		if t := cat.lookup(q.GetType()); t != nil && t.point != nil {
			var ok bool
			if arena, ok = t.point.Key(arena, q); ok {
				points = append(points, pointJob{i: i, t: t})
				ends = append(ends, len(arena))
				continue
			}
		}
		rest = append(rest, i)
	}
	start := 0
	for k, end := range ends {
		points[k].key = arena[start:end:end]
		start = end
	}
	slices.SortFunc(points, func(a, b pointJob) int { return bytes.Compare(a.key, b.key) })
	return points, rest
}

func queryError(id uint64, err error) *pb.QueryError {
	st := Status(err)
	qe := &pb.QueryError{Query: id, Code: int32(st.Code()), Message: st.Message()}
	var e *Error
	if errors.As(err, &e) {
		qe.Field = e.Field
	}
	return qe
}
