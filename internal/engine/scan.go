package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/store"
)

// maxScanParallelism caps ScanRequest.parallelism.
const maxScanParallelism = 256

// Scan streams every match of one query. With parallelism > 1 the plan's
// key ranges are cut at storage-file boundaries into contiguous parts read
// concurrently on one snapshot. When the query asks for an order, parts are
// emitted in key order (later parts read ahead into a bounded buffer);
// otherwise batches go out as they fill. The last response carries the
// count and done.
func (e *Engine) Scan(ctx context.Context, req *pb.ScanRequest, send func(*pb.ScanResponse) error) error {
	return e.ScanStream(ctx, req, scanFunc(send))
}

// ScanStream is Scan with a transport's own sink, whose optional
// interfaces (sink.go) it uses.
func (e *Engine) ScanStream(ctx context.Context, req *pb.ScanRequest, sink ScanSink) (err error) {
	defer func() { err = storeError(err) }() // a compacted revision, on etcd
	e.stats.Queries.Add(1)
	c, err := e.compile(req.GetQuery())
	if err != nil {
		e.stats.QueryErrors.Add(1)
		return err
	}
	par := int(req.GetParallelism())
	if par <= 0 {
		par = 1
	}
	if par > maxScanParallelism {
		return &apierror.Error{Code: apierror.InvalidArgument, Msg: "parallelism " + itoa(par) + " is over the limit of " + itoa(maxScanParallelism), Field: "parallelism"}
	}
	batchSize := int(req.GetBatchSize())
	if batchSize <= 0 || batchSize > e.opts.MaxResultRecords*10 {
		batchSize = e.opts.MaxResultRecords
	}

	snap, err := e.st.OpenSnapshot()
	if err != nil {
		return storeError(err)
	}
	defer snap.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sc := &scan{e: e, c: c, snap: snap, batchSize: batchSize, limit: c.plan.Limit, cancel: cancel, sink: sink}
	_, sc.reuse = sink.(EncodingSink)
	start := time.Now()
	sc.start(ctx, e.split(c.plan, par))
	err = sc.collect(ctx)
	e.queryDone("Scan", c, start, sc.sent, sc.read.Load())
	return err
}

// scan is one Scan call: its parts' readers and the one emitter.
type scan struct {
	e         *Engine
	c         *compiled
	snap      store.View
	batchSize int
	limit     uint64
	cancel    context.CancelFunc
	sink      ScanSink

	// reuse says that sink encodes before it returns (EncodingSink): the
	// parts then build their responses in scanBufs that the emitter hands
	// back through free once sent.
	reuse bool
	free  chan *scanBuf

	ordered bool
	chans   []chan scanned // per part when ordered; else all the one shared channel
	// turns[i] is closed when the emitter starts on part i (ordered only).
	// A part reading ahead takes result budget only if it is free at once,
	// else waits for its turn: parts queued in the budget before the
	// emitter's part would wait on the emitter, which waits on that part.
	// ahead is what parts hold of the budget for responses built before
	// their turn. When the part being sent finds the budget full while
	// ahead > 0, the budget is held by this very scan's read-ahead, which
	// waits on that part: it goes on without a reservation (one response
	// over the budget) rather than wait for itself.
	turns []chan struct{}
	ahead atomic.Int64
	wg    sync.WaitGroup
	errs  []error // per part, read after wg.Wait
	// total counts matches over all parts; parts add to it once per
	// response, not once per record.
	total atomic.Uint64
	// read counts the records the parts read, matching or not, for the
	// slow-query line.
	read atomic.Uint64

	// Emitter state, used by collect's goroutine only.
	sent      uint64
	sendErr   error
	explained bool
}

// start runs one reader per part.
func (sc *scan) start(ctx context.Context, parts [][]query.Range) {
	sc.ordered = sc.c.q.GetOrder() != nil && len(parts) > 1
	sc.explained = !sc.c.q.GetExplain()
	sc.chans = make([]chan scanned, len(parts))
	shared := make(chan scanned, 2*len(parts))
	for i := range sc.chans {
		if sc.ordered {
			sc.chans[i] = make(chan scanned, 2)
		} else {
			sc.chans[i] = shared
		}
	}
	sc.errs = make([]error, len(parts))
	if sc.reuse {
		// Room for every response that can be out at once: one being
		// built per part, those queued (two per part) and one being sent.
		sc.free = make(chan *scanBuf, 3*len(parts)+1)
	}
	if sc.ordered {
		sc.turns = make([]chan struct{}, len(parts))
		for i := range sc.turns {
			sc.turns[i] = make(chan struct{})
		}
	}
	for i, part := range parts {
		sc.wg.Add(1)
		go func() {
			defer sc.wg.Done()
			if sc.ordered {
				defer close(sc.chans[i])
			}
			sc.errs[i] = sc.part(ctx, i, part, sc.chans[i])
			if sc.errs[i] != nil {
				sc.cancel()
			}
		}()
	}
	if !sc.ordered {
		go func() { sc.wg.Wait(); close(shared) }()
	}
}

// collect emits the parts' responses (in part order when ordered), then
// the last response with the count.
func (sc *scan) collect(ctx context.Context) error {
	if sc.ordered {
		for i, ch := range sc.chans {
			close(sc.turns[i])
			for resp := range ch {
				sc.emit(resp)
			}
		}
	} else if len(sc.chans) > 0 {
		for resp := range sc.chans[0] {
			sc.emit(resp)
		}
	}
	sc.wg.Wait()
	if sc.sendErr != nil {
		return sc.sendErr
	}
	limit := sc.limit
	if limit == 0 || sc.sent < limit {
		for _, err := range sc.errs {
			if err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	count := sc.sent
	if sc.c.plan.Count {
		count = sc.total.Load()
		if limit > 0 && count > limit {
			count = limit
		}
	}
	last := &pb.ScanResponse{Count: count, Done: true}
	if !sc.explained {
		last.Plan = sc.c.plan.Explain()
	}
	return sc.sink.Send(last, Hold{})
}

// scanned is a response on its way to the emitter, with the bytes of the
// server's result budget it holds until sent (or dropped).
type scanned struct {
	resp  *pb.ScanResponse
	held  int64
	ahead bool // held counts in scan.ahead
	// buf, when set, holds resp; the emitter gives it back.
	buf *scanBuf
}

// scanBuf is a response of a Scan whose sink encodes (EncodingSink), with the
// packer that holds its records' Any messages and values. A part fills
// it, the emitter sends it and hands it back (scan.free), and a part
// fills it again: a Scan then makes as many responses' messages and
// buffers as were ever out at once, not one set per response. A part
// makes a scanBuf only when none is free, so that the scanBufs never
// outnumber the responses out at the busiest moment, which the result
// budget and the channels bound as before. A scanBuf is owned by one
// goroutine at a time: a part until it is queued, then the emitter until
// it is back on the free list.
type scanBuf struct {
	resp pb.ScanResponse
	pk   packer
}

// takeBuf returns an empty scanBuf.
func (sc *scan) takeBuf() *scanBuf {
	select {
	case b := <-sc.free:
		return b
	default:
	}
	b := &scanBuf{pk: packer{slabSize: min(sc.batchSize, 256), maxBuf: 256 << 10, reuse: true}}
	b.resp.Records = make([]*anypb.Any, 0, sc.batchSize)
	return b
}

// giveBack empties b, which the emitter is done with, for the parts.
func (sc *scan) giveBack(b *scanBuf) {
	b.resp.Records = b.resp.Records[:0]
	b.resp.Versions = b.resp.Versions[:0]
	b.resp.Plan = nil
	b.pk.cut()
	select {
	case sc.free <- b:
	default: // not possible (see start); the GC takes it
	}
}

// emit sends one response, cut to the limit; the plan rides on the first.
// Every response read off the channels passes here, sent or not: its share
// of the result budget goes with it to the transport, or back at once.
func (sc *scan) emit(s scanned) {
	if s.ahead {
		sc.ahead.Add(-s.held)
	}
	h := Hold{e: sc.e, n: s.held}
	if s.buf != nil {
		defer sc.giveBack(s.buf) // sent (and so encoded) or dropped
	}
	resp := s.resp
	if sc.sendErr != nil {
		h.Release()
		return
	}
	limit := sc.limit
	if limit > 0 && sc.sent+uint64(len(resp.Records)) > limit {
		resp.Records = resp.Records[:limit-sc.sent]
		if len(resp.Versions) > 0 {
			resp.Versions = resp.Versions[:limit-sc.sent]
		}
	}
	if len(resp.Records) == 0 {
		h.Release()
		return
	}
	sc.sent += uint64(len(resp.Records))
	if !sc.explained {
		resp.Plan = sc.c.plan.Explain()
		sc.explained = true
	}
	if sc.sendErr = sc.sink.Send(resp, h); sc.sendErr != nil {
		sc.cancel()
	}
	if limit > 0 && sc.sent >= limit {
		sc.cancel()
	}
}

// part reads one part into bounded responses. Before it builds a response
// it takes a full response's bytes of the server's result budget (as
// Search does): a Scan of many parts whose client does not read holds what
// the budget allows, not parts × two responses, and gives it back when the
// responses are sent or the scan ends.
func (sc *scan) part(ctx context.Context, idx int, part []query.Range, out chan<- scanned) error {
	e, c := sc.e, sc.c
	pr := &partRun{sc: sc, idx: idx, out: out}
	cu := &cursor{e: e, c: c, r: sc.snap, onRead: func(n uint64) { sc.read.Add(n) }}
	if !sc.reuse {
		// Point reads land in the packer's buffer. Not with scanBufs,
		// whose packers the emitter rewinds while the cursor goes on.
		pr.pk = &packer{slabSize: 256, maxBuf: 256 << 10}
		cu.pk = pr.pk
	}
	defer cu.flushStats()
	defer pr.release()
	err := cu.run(ctx, part, nil, func(_, rec []byte) bool { return pr.add(ctx, rec, cu) })
	if err == nil {
		err = pr.budgetErr
	}
	if err != nil {
		sc.total.Add(pr.n - pr.added)
		return err
	}
	pr.flush(ctx)
	return nil
}

// partRun is the state of one part's reader; it belongs to the part's
// goroutine. resp, once queued to out, is the emitter's.
type partRun struct {
	sc  *scan
	idx int
	out chan<- scanned
	pk  *packer

	resp      *pb.ScanResponse
	buf       *scanBuf // holds resp, when reusing
	size      int
	avg       int   // bytes per record in the last response sent; 0 before the first
	held      int64 // of the result budget, by resp
	ahead     bool  // held was taken before this part's turn
	exhausted bool
	budgetErr error
	n, added  uint64 // matches of this part; of them, added to total
}

// add takes one matching record, the one cu read; false stops the part.
func (pr *partRun) add(ctx context.Context, rec []byte, cu *cursor) bool {
	sc := pr.sc
	e, c := sc.e, sc.c
	pr.n++
	if c.plan.Count {
		return true
	}
	// Each cursor stops at the limit on its own part. Without an order,
	// any limit matches will do, so parts also stop once together they
	// have enough; with an order, an earlier part's matches must win, so
	// parts never stop each other.
	if !sc.ordered && sc.limit > 0 && pr.n-pr.added+sc.total.Load() > sc.limit {
		return false
	}
	if pr.resp != nil && (len(pr.resp.Records) >= sc.batchSize || pr.size+len(rec) > e.opts.MaxResultBytes) {
		if !pr.flush(ctx) {
			return false
		}
	}
	if pr.resp == nil {
		want := min(int64(e.opts.MaxResultBytes), e.opts.MaxResultBufferBytes)
		if pr.held, pr.ahead, pr.budgetErr = sc.reserve(ctx, pr.idx, want, &pr.exhausted); pr.budgetErr != nil {
			return false
		}
		if sc.reuse {
			pr.buf = sc.takeBuf()
			pr.resp, pr.pk = &pr.buf.resp, &pr.buf.pk
		} else {
			pr.resp = &pb.ScanResponse{Records: make([]*anypb.Any, 0, sc.batchSize)}
		}
	}
	if !pr.cover(ctx, rec) {
		return false
	}
	if pr.avg == 0 {
		pr.avg = len(rec)
	}
	pr.resp.Records = append(pr.resp.Records, pr.pk.pack(c.t.url, rec, valuesWanted(sc.batchSize-len(pr.resp.Records), pr.avg)))
	if cu.wantVer {
		pr.resp.Versions = append(pr.resp.Versions, cu.ver)
	}
	pr.size += len(rec)
	return true
}

// flush queues the response built so far, if any, and counts the part's
// matches into the scan's total; false when the scan is over.
func (pr *partRun) flush(ctx context.Context) bool {
	sc := pr.sc
	sc.total.Add(pr.n - pr.added)
	pr.added = pr.n
	if pr.resp == nil {
		return true
	}
	pr.avg = pr.size/len(pr.resp.Records) + 1 // once queued, resp is the emitter's
	pr.trim()
	select {
	case pr.out <- scanned{resp: pr.resp, held: pr.held, ahead: pr.ahead, buf: pr.buf}:
	case <-ctx.Done():
		return false // buf, not queued, goes with the GC
	}
	pr.resp, pr.buf, pr.size, pr.held, pr.ahead = nil, nil, 0, 0, false
	if !sc.reuse {
		pr.pk.cut()
	}
	return true
}

// release gives back what an unqueued response held of the budget.
func (pr *partRun) release() {
	pr.give(pr.held)
	pr.held, pr.ahead = 0, false
}

// give gives n of what the response holds back to the budget.
func (pr *partRun) give(n int64) {
	pr.sc.e.results.Release(n)
	if pr.ahead {
		pr.sc.ahead.Add(-n)
	}
}

// cover makes the response, still empty, hold room for a record larger
// than a full response before it is copied in (see Engine.cover); false
// stops the part, with budgetErr set unless the scan is over.
func (pr *partRun) cover(ctx context.Context, rec []byte) bool {
	sc := pr.sc
	e := sc.e
	need := int64(resultBytes(len(rec), len(sc.c.t.url)))
	if pr.size > 0 || need <= pr.held || need <= int64(e.opts.MaxResultBytes) {
		return true
	}
	if pr.budgetErr = e.overBudget(need); pr.budgetErr != nil {
		return false
	}
	pr.release() // hold nothing while waiting for room
	pr.held, pr.ahead, pr.budgetErr = sc.reserve(ctx, pr.idx, need, &pr.exhausted)
	return pr.budgetErr == nil
}

// trim cuts what the built response holds to its size (see Engine.take).
func (pr *partRun) trim() {
	keep := min(pr.held, int64(pr.size)+MinHeld)
	if extra := pr.held - keep; extra > 0 {
		pr.give(extra)
		pr.held = keep
	}
}

// valuesWanted is the values buffer to make for the rest of a response of
// left more records of about avg bytes each, an eighth over so that a
// response of records a little larger than the last needs no second buffer.
// It was the packer's largest buffer (256 KiB) whatever the response: at
// 1,000 records of 100 bytes, 0.16 MiB of every response's buffer was
// allocated and cleared for nothing.
func valuesWanted(left, avg int) int {
	return left*avg + left*avg/8
}

// reserve takes want bytes of the result budget for a response of part
// idx, and says how much it holds and whether that counts as read-ahead;
// see turns.
func (sc *scan) reserve(ctx context.Context, idx int, want int64, exhausted *bool) (held int64, ahead bool, err error) {
	if !sc.ordered {
		return sc.acquire(ctx, want, exhausted)
	}
	select {
	case <-sc.turns[idx]:
	default:
		sc.ahead.Add(want) // before taking: the sent part must never see 0 while this holds
		if sc.e.results.TryAcquire(want) {
			return want, true, nil
		}
		sc.ahead.Add(-want)
		select {
		case <-sc.turns[idx]:
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	}
	if sc.e.results.TryAcquire(want) {
		return want, false, nil
	}
	if sc.ahead.Load() > 0 {
		return 0, false, nil
	}
	return sc.acquire(ctx, want, exhausted)
}

func (sc *scan) acquire(ctx context.Context, want int64, exhausted *bool) (int64, bool, error) {
	if err := sc.e.acquireResult(ctx, want, exhausted); err != nil {
		return 0, false, err
	}
	return want, false, nil
}

// split cuts a plan's ranges into at most n contiguous parts of similar
// size, in key order (reversed for reverse plans).
func (e *Engine) split(p *query.Plan, n int) [][]query.Range {
	if n <= 1 {
		return [][]query.Range{p.Ranges}
	}
	var pieces []query.Range
	for _, rg := range p.Ranges {
		cuts, err := e.st.SplitKeys(rg.Start, rg.End, n)
		if err != nil || len(cuts) == 0 {
			pieces = append(pieces, rg)
			continue
		}
		start := rg.Start
		for _, k := range cuts {
			pieces = append(pieces, query.Range{Start: start, End: k})
			start = k
		}
		pieces = append(pieces, query.Range{Start: start, End: rg.End})
	}
	if len(pieces) <= 1 {
		return [][]query.Range{pieces}
	}
	parts := make([][]query.Range, 0, n)
	per := (len(pieces) + n - 1) / n
	for i := 0; i < len(pieces); i += per {
		parts = append(parts, pieces[i:min(i+per, len(pieces))])
	}
	if p.Reverse {
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
	}
	return parts
}
