package engine

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
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
// A request of plain primary-key lookups that arrives while no chunk runs
// is one chunk run by the receiving goroutine, which sends its responses
// itself (sender.deliver): the alternating pattern then pays no goroutine
// hand-off, as Lab.Echo pays none.
//
// Flow control: responses pass through a small channel to the one sender;
// when the client reads slowly, send blocks, the channel fills, workers
// block, the pool stays full and recv is not called, so the client's own
// sends block on HTTP/2 flow control. Memory stays bounded by the pool size
// times the response bound per stream, and by MaxResultBufferBytes over
// all streams: a worker reserves a response's bytes before building it
// (responder.reserve) and the sender gives them back once the response is
// sent or the stream is over.
func (e *Engine) Search(ctx context.Context, recv func() (*pb.SearchRequest, error), send func(*pb.SearchResponse) error) error {
	f := &searchFuncs{recv: recv, send: send}
	return e.SearchStream(ctx, f, f)
}

// SearchStream is Search with a transport's own ends, whose optional
// interfaces (sink.go) it uses.
func (e *Engine) SearchStream(ctx context.Context, src SearchSource, sink SearchSink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := e.opts.SearchWorkers
	out := make(chan outgoing, workers)
	snd := &sender{e: e, sink: sink, cancel: cancel}
	snd.out, snd.outWire = snd.deliver, snd.deliverWire
	snd.wire, _ = sink.(WireSink)
	if snd.wire == nil {
		snd.lookupWire, _ = sink.(LookupWireSink)
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for o := range out {
			snd.deliver(o)
		}
	}()
	st := &searchStream{
		e: e, src: src, snd: snd, sem: make(chan struct{}, workers),
		queue: func(o outgoing) bool {
			select {
			case out <- o:
				return true
			case <-ctx.Done():
				o.held.Release()
				return false
			}
		},
		// Responses as wire bytes (searchenc.go) for requests run here.
		wire: snd.wire != nil || snd.lookupWire != nil,
	}
	st.wireSrc, _ = src.(WireSource)
	st.recycler, _ = src.(Recycler)
	// On a shared store only the lookups' wire path is held to the
	// message path's answers (TestSharedSearchWireMatchesMessages): a
	// lone query of another kind keeps the message path there.
	st.wireAny = st.wire && snd.wire != nil && !e.st.Shared()
	_, st.order.reuse = sink.(EncodingSink)
	err := st.serve(ctx)
	st.wg.Wait()
	close(out)
	<-sent
	if err != nil {
		return err
	}
	if err := snd.err(); err != nil {
		return err
	}
	return ctx.Err()
}

// searchStream is the receiving side of one SearchStream call; it belongs
// to the call's goroutine (the workers it starts share only sem, wg and
// queue, which are safe for them).
type searchStream struct {
	e   *Engine
	src SearchSource
	// wireSrc and recycler are src's optional interfaces, nil when it
	// lacks them.
	wireSrc  WireSource
	recycler Recycler
	snd      *sender
	sem      chan struct{} // a slot per running worker
	wg       sync.WaitGroup
	queue    func(outgoing) bool
	// wire: requests of plain primary-key lookups run here are written as
	// wire bytes; wireAny: so is a request of one query of any kind
	// (the sink is a WireSink).
	wire    bool
	wireAny bool
	next    uint64    // the id of the next query
	order   lookupBuf // the inline requests', one at a time
}

// serve receives and runs requests until the client is done (nil), the
// stream fails (its error) or ctx ends (nil: SearchStream reports why).
func (st *searchStream) serve(ctx context.Context) error {
	e := st.e
	for ctx.Err() == nil {
		var req *pb.SearchRequest
		var err error
		if st.wireSrc != nil {
			var ran int
			req, ran, err = e.recvWire(ctx, st.wireSrc, st.wire && len(st.sem) == 0, st.next, &st.order, st.snd)
			if ran > 0 {
				st.next += uint64(ran)
				continue
			}
		} else {
			req, err = st.src.Recv()
		}
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		qs := req.GetQueries()
		// A request of point lookups arriving while nothing else runs
		// (the alternating pattern) runs here and sends its own
		// responses: handing it to workers and a sender cost more in
		// goroutine switches than its lookups, and on a busy machine
		// each switch waits for a time slice.
		switch {
		case len(st.sem) == 0 && e.allPoints(qs, &st.order):
			e.runInline(ctx, qs, st.next, &st.order, st.snd, st.wire)
			if st.recycler != nil && ctx.Err() == nil {
				st.recycler.Recycle(req) // its queries' messages are not read again
			}
		case st.wireAny && loneQuery(qs):
			// A request of one other query runs on a worker that sends
			// its responses itself, as wire bytes (searchrange.go).
			q, id := qs[0], st.next
			e.spawn(ctx, st.sem, &st.wg, func() { e.wireQuery(ctx, q, id, st.snd.outWire) })
		default:
			e.dispatch(ctx, qs, st.next, st.sem, &st.wg, st.queue)
		}
		st.next += uint64(len(qs))
	}
	return nil
}

// runInline runs a request of plain primary-key lookups (allPoints) on
// the receiving goroutine, its responses written as wire bytes when wire
// allows.
func (e *Engine) runInline(ctx context.Context, qs []*pb.Query, next uint64, order *lookupBuf, snd *sender, wire bool) {
	if !wire {
		e.runChunk(ctx, qs, next, snd.out, order)
		return
	}
	var start time.Time
	if e.timed() {
		start = time.Now()
	}
	e.wireLookups(ctx, len(qs), next, order, snd.outWire)
	e.observeSearch(ctx, query.AccessPKPoint, len(qs), searchTimes{start: start})
	if e.opts.SlowQuery > 0 {
		e.logSlowSearch(qs, start)
	}
}

// recvWire receives the next request from src as wire bytes. When
// inline allows and it holds plain primary-key lookups only, it runs them
// from their bytes, sending their responses as wire bytes, and returns how
// many it ran; otherwise it returns the request decoded.
func (e *Engine) recvWire(ctx context.Context, src WireSource, inline bool, next uint64, order *lookupBuf, snd *sender) (*pb.SearchRequest, int, error) {
	b, err := src.RecvWire()
	if err != nil {
		return nil, 0, err
	}
	if !inline || b == nil || !e.wirePoints(b, order, src.MaxQueries()) {
		req, err := src.DecodeWire()
		return req, 0, err
	}
	var start time.Time
	if e.timed() {
		start = time.Now()
	}
	n := len(order.points)
	e.wireLookups(ctx, n, next, order, snd.outWire)
	e.observeSearch(ctx, query.AccessPKPoint, n, searchTimes{start: start})
	if e.opts.SlowQuery > 0 {
		e.logSlowWire(order.points, start)
	}
	return nil, n, nil
}

// sender sends a stream's responses, from the stream's sending goroutine
// or, for a request run inline, from the receiving one, or from the
// worker of a lone query written as wire bytes; mu makes them
// take turns, as gRPC requires, and guards sendErr, the first failure,
// after which responses are dropped (so that no worker blocks).
type sender struct {
	e    *Engine
	sink SearchSink
	// wire and lookupWire are sink's optional interfaces, nil when it
	// lacks them; lookupWire is only looked for when wire is nil.
	wire       WireSink
	lookupWire LookupWireSink
	cancel     context.CancelFunc
	// out and outWire are deliver and deliverWire as func values, made
	// once per stream: a method value made per request is an allocation.
	out     func(outgoing) bool
	outWire func([]byte, Hold) bool

	mu      sync.Mutex
	sendErr error
}

// deliver sends o unless an earlier send failed (then it gives back the
// result budget o holds; the transport does once it sent o), and reports
// whether the stream goes on.
func (s *sender) deliver(o outgoing) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sendErr != nil {
		o.held.Release()
	} else if err := s.sink.Send(o.resp, o.held); err != nil {
		s.sendErr = err
		s.cancel()
	}
	return s.sendErr == nil
}

// deliverWire is deliver for a response given as wire bytes, holding h of
// the result budget: the response to a request of plain primary-key
// lookups, or, when the sink is a WireSink, to any request.
func (s *sender) deliverWire(b []byte, h Hold) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sendErr != nil {
		h.Release()
		return false
	}
	var err error
	if s.wire != nil {
		err = s.wire.SendWire(b, h)
	} else {
		err = s.lookupWire.SendLookupWire(b, h)
	}
	if err != nil {
		s.sendErr = err
		s.cancel()
	}
	return s.sendErr == nil
}

func (s *sender) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendErr
}

// outgoing is a response on its way to the sender, with the bytes of the
// result budget it holds until the transport is done with it.
type outgoing struct {
	resp *pb.SearchResponse
	held Hold
}

// resultBytes is what one record of a response counts against
// MaxResultBytes: its bytes, its type URL's and 8 for the Any's and the
// batch's framing. Every path that builds responses counts it so, so that
// they cut responses at the same records (the lookups' encoder passes
// its encoded type URL field, one or two bytes longer than the URL).
func resultBytes(rec, url int) int { return rec + url + 8 }

// versionBytes is what a record's version adds to a response that carries
// versions, at most: a varint of a uint64. The answers cut to a
// transport's limit as they are built (a Get, a Query page) count it; a
// stream's result messages stay far enough below the send limit without.
const versionBytes = 10

// resultBudgetWait is how long a query waits for room in the server's
// result budget (held by responses that clients are slow to read) before
// it fails with RESOURCE_EXHAUSTED.
const resultBudgetWait = 10 * time.Second

// spawn runs f on a worker of the stream once sem has room (or not at
// all once ctx ends).
func (e *Engine) spawn(ctx context.Context, sem chan struct{}, wg *sync.WaitGroup, f func()) {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	wg.Add(1)
	go func() {
		defer func() { <-sem; wg.Done() }()
		f()
	}()
}

// dispatch cuts a request's queries (the first has id first) into chunks
// run by the stream's workers, a worker per chunk while sem has room: enough
// chunks to keep every worker busy, not so many that a batch of point
// lookups pays per-goroutine costs per query.
func (e *Engine) dispatch(ctx context.Context, qs []*pb.Query, first uint64, sem chan struct{}, wg *sync.WaitGroup, queue func(outgoing) bool) {
	size := max(1, (len(qs)+cap(sem)-1)/cap(sem))
	for start := 0; start < len(qs); start += size {
		chunk := qs[start:min(start+size, len(qs))]
		id := first + uint64(start)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			e.runChunk(ctx, chunk, id, queue, nil)
		}()
	}
}

// responder runs the queries of one Search chunk and packs their results,
// completions and errors into bounded responses. It belongs to the chunk's
// worker.
type responder struct {
	e *Engine
	// out hands a finished response on (to the sender, or sends it);
	// false means the stream is over.
	out   func(outgoing) bool
	ctx   context.Context
	resp  *pb.SearchResponse
	recs  int
	bytes int
	// h is what the current response holds of the result budget.
	h  hold
	pk *packer
	// arena, when set, lends the responses their messages, reused from
	// response to response (an EncodingSink, requests run inline).
	arena *respArena
	// pit serves the chunk's lone point lookups, made on first use;
	// pitGen is the record cache's generation taken before it was made.
	pit    store.Iterator
	pitGen uint64
	// Slabs: a batch of point lookups makes per query a ResultBatch, its
	// one-element record list and a QueryDone (and an Any, from the
	// packer); taking them from arrays makes that one allocation per 64
	// queries, not one each. Messages handed out are never reused.
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
	o := outgoing{r.resp, r.e.take(&r.h, r.bytes)}
	r.resp = nil // out owns o's budget now, sent or not
	if !r.out(o) {
		return false
	}
	r.recs, r.bytes = 0, 0
	r.pk.cut()
	if r.arena != nil {
		r.arena.rewind() // out has encoded o: its messages are free
	}
	return true
}

// reserve makes the current response hold a full response's bytes of the
// result budget, waiting (the backpressure of clients that read slowly)
// at most resultBudgetWait.
func (r *responder) reserve() error { return r.e.reserve(r.ctx, &r.h) }

// acquireResult takes need bytes of the server's result budget, waiting
// at most resultBudgetWait; once a wait has timed out (*exhausted), later
// calls of the same request fail at once instead of each waiting again.
func (e *Engine) acquireResult(ctx context.Context, need int64, exhausted *bool) error {
	// The budget is rarely full: take it without a timer first, so that a
	// response pays no context or timer allocation for the common case.
	switch {
	case e.results.TryAcquire(need):
		return nil
	case *exhausted:
		return errResultBudget
	}
	wctx, cancel := context.WithTimeout(ctx, resultBudgetWait)
	err := e.results.Acquire(wctx, need)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		*exhausted = true
		return errResultBudget
	}
	return nil
}

// release gives back what an unsent response held, when the chunk ends.
func (r *responder) release() { r.e.release(&r.h) }

var errResultBudget = apierror.New(apierror.ResourceExhausted,
	"the server's result buffers are full (clients are not reading their results); retry later")

func (r *responder) cur() *pb.SearchResponse {
	if r.resp == nil {
		if r.arena != nil {
			r.resp = &r.arena.resp
		} else {
			r.resp = &pb.SearchResponse{}
		}
	}
	return r.resp
}

func (r *responder) batch(id uint64) *pb.ResultBatch {
	if r.arena != nil {
		return r.arena.batch(id)
	}
	if len(r.batches) == 0 {
		r.batches = make([]pb.ResultBatch, r.slabSize())
	}
	b := &r.batches[0]
	r.batches = r.batches[1:]
	b.Query = id
	return b
}

func (r *responder) done(id, count uint64) *pb.QueryDone {
	if r.arena != nil {
		return r.arena.done(id, count)
	}
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
	if r.arena != nil {
		return r.arena.first(a)
	}
	if len(r.ptrs) == 0 {
		r.ptrs = make([]*anypb.Any, r.slabSize())
	}
	l := r.ptrs[:1:1]
	r.ptrs = r.ptrs[1:]
	l[0] = a
	return l
}

// fail reports query id's error alone; the chunk goes on.
func (r *responder) fail(id uint64, err error) {
	r.e.stats.QueryErrors.Add(1)
	r.cur().Errors = append(r.cur().Errors, queryError(id, storeError(err)))
}

// runChunk runs the queries qs, the first of which has id first, and hands
// their responses to out. buf, when not nil, lends the lookup order its
// buffers (nothing keeps them once runChunk returns).
func (e *Engine) runChunk(ctx context.Context, qs []*pb.Query, first uint64, out func(outgoing) bool, buf *lookupBuf) {
	var start time.Time
	if e.timed() { // one clock read per request, not per lookup
		start = time.Now()
	}
	r := &responder{e: e, out: out, ctx: ctx, queries: len(qs)}
	if buf != nil && buf.reuse {
		r.arena = arenas.Get().(*respArena)
		defer arenas.Put(r.arena)
		r.arena.start(r.slabSize())
		r.pk = &r.arena.pk
	} else {
		r.pk = &packer{slabSize: r.slabSize(), maxBuf: 64 << 10}
	}
	defer func() {
		if r.pit != nil {
			r.pit.Close()
		}
		r.release()
	}()
	var scratch pointScratch
	cu := &cursor{e: e, pk: r.pk} // reused: its buffers outlive each query
	defer cu.flushStats()
	e.stats.Queries.Add(uint64(len(qs)))
	var points []pointJob
	var rest []int
	if buf != nil && buf.ready {
		points, buf.ready = buf.points, false
	} else {
		points, rest = e.lookupOrder(qs, buf)
	}
	if len(points) > 1 && e.st.Shared() {
		r.prefetch(points)
	}
	staged := e.stageLookups(points, buf)
	for k := range qs {
		if k == len(points) && k > 0 {
			e.observeSearch(ctx, query.AccessPKPoint, k, searchTimes{start: start})
		}
		var i int
		var c *compiled
		var err error
		var qt searchTimes
		cu.staged = nil
		if k < len(points) {
			p := &points[k]
			i = p.i
			c = scratch.point(p.t, p.key, qs[i])
			cu.staged = staged
			cu.stagedAt = k
		} else {
			i = rest[k-len(points)]
			qt = e.searchStart()
			c, err = e.compile(qs[i])
			qt.plannedNow()
		}
		id := first + uint64(i)
		if err != nil {
			r.fail(id, err)
			continue
		}
		if !r.run(ctx, cu, c, id, len(qs)-k) {
			return
		}
		e.observeSearch(ctx, c.plan.Access, 1, qt)
	}
	if len(points) == len(qs) && len(qs) > 0 {
		e.observeSearch(ctx, query.AccessPKPoint, len(qs), searchTimes{start: start})
	}
	cu.flushStats()
	r.flush()
	if e.opts.SlowQuery > 0 {
		e.logSlowSearch(qs, start)
	}
	// Sorting pays off only for the lookups that reach the store.
	e.noteMisses(cu.cacheMisses, len(points))
}

// prefetch reads the chunk's point lookups together through the chunk's
// iterator, on a store whose reads cross a network (store.Iterator's
// Prefetch): their Lookups then cost no round trip each. A failure is
// left for the lookups to meet one by one.
func (r *responder) prefetch(points []pointJob) {
	r.pit = r.e.prefetch(points)
}

// prefetch returns an iterator that has read the points' records together
// (store.Iterator's Prefetch), or nil when none could be made. A failure
// to prefetch is left for the lookups to meet one by one.
func (e *Engine) prefetch(points []pointJob) store.Iterator {
	pit, err := e.st.NewIterator(nil, nil)
	if err != nil {
		return nil
	}
	keys := make([][]byte, len(points))
	for i := range points {
		keys[i] = points[i].key
	}
	_ = pit.Prefetch(keys)
	return pit
}

// open sets cu up to read query c; done releases what it holds once the
// query has run.
func (r *responder) open(cu *cursor, c *compiled) (done func(), err error) {
	e := r.e
	cu.c, cu.n, cu.pit = c, 0, nil
	if c.plan.Access != query.AccessPKPoint || len(c.plan.Ranges) != 1 {
		cu.r, done, err = e.reader(c)
		return done, err
	}
	// Lone point lookups share one iterator per chunk: each still reads
	// one consistent state, the iterator's, fixed after the request
	// arrived.
	if r.pit == nil {
		gen := e.cache.Gen()
		pit, err := e.st.NewIterator(nil, nil)
		if err != nil {
			return nil, err
		}
		r.pit, r.pitGen = pit, gen
	}
	cu.r, cu.pit, cu.pitGen = e.st, r.pit, r.pitGen
	return func() {}, nil
}

// run runs one query of the chunk and packs its results; left is how many
// of the chunk's queries are still to run, this one included. It reports
// false when the stream is over.
func (r *responder) run(ctx context.Context, cu *cursor, c *compiled, id uint64, left int) bool {
	e, q := r.e, c.q
	if err := r.reserve(); err != nil {
		if ctx.Err() != nil {
			return false
		}
		r.fail(id, err)
		return true
	}
	done, err := r.open(cu, c)
	if err != nil {
		r.fail(id, err)
		return true
	}
	var batch *pb.ResultBatch
	explained := false
	var budgetErr error
	err = cu.run(ctx, c.plan.Ranges, nil, func(_, rec []byte) bool {
		if c.plan.Count {
			return true
		}
		if r.recs >= e.opts.MaxResultRecords || r.bytes+len(rec) > e.opts.MaxResultBytes && r.recs > 0 {
			if !r.flush() {
				return false
			}
			if budgetErr = r.reserve(); budgetErr != nil {
				return false
			}
			batch = nil
		}
		if budgetErr = e.cover(ctx, &r.h, int64(r.bytes+resultBytes(len(rec), len(c.t.url))), r.recs == 0); budgetErr != nil {
			return false
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
		// A range expects many records; a point lookup one per key of
		// the chunk's remaining lookups, so a lone lookup does not pay
		// for a 64 KiB buffer.
		want := 64 << 10
		if c.plan.Access == query.AccessPKPoint {
			want = len(rec) * (left + len(c.plan.Ranges))
		}
		a := r.pk.pack(c.t.url, rec, want)
		if batch.Records == nil {
			batch.Records = r.first(a)
		} else {
			batch.Records = append(batch.Records, a)
		}
		if cu.wantVer {
			batch.Versions = append(batch.Versions, cu.ver)
		}
		r.recs++
		r.bytes += resultBytes(len(rec), len(c.t.url))
		return true
	})
	done()
	if err == nil {
		err = budgetErr
	}
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		r.fail(id, err)
		return true
	}
	d := r.done(id, cu.n)
	if q.GetExplain() && !explained {
		d.Plan = c.plan.Explain()
	}
	r.cur().Done = append(r.cur().Done, d)
	return true
}

func queryError(id uint64, err error) *pb.QueryError {
	e := apierror.From(err)
	return &pb.QueryError{Query: id, Code: int32(e.Code), Message: e.Error(), Field: e.Field}
}
