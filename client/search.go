package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Search multiplexes many queries on one Search stream. Send queries with
// Query or Batch; each returns a Results per query, read concurrently or in
// any order. Safe for concurrent use.
//
// A goroutine waiting for a query's results receives the stream's
// responses itself, when no other goroutine is receiving: it routes each
// response to its queries and returns once its own query has results. A
// background goroutine receiving every response would add a hand-off per
// response (it wakes the waiting caller, which on this kind of machine
// starts tens to hundreds of microseconds later), as much as a one-key
// round trip costs. While one goroutine receives, the others wait to be
// woken, and the first of them takes over when it stops.
//
// Results are received in the background and queued per query until read
// whenever responses are owed and no goroutine waits for them: when a
// reader stops receiving with other queries unfinished, and when a Batch
// is sent while earlier queries are unfinished. So queries can be read in
// any order, or not at all, without stalling the others: one stream
// carries every query's results interleaved, and a bounded per-query
// buffer would let one unread query block the delivery of the query being
// read (a deadlock). Nor does the server, which stops reading requests
// while it cannot send responses, hold responses that nobody reads, and
// with them its result buffers. Only the queries of the latest Batch wait
// in the transport until their sender reads them, sends again or closes.
// The cost is memory: results that arrived and were not read stay
// queued. For result sets larger than memory, use Scan, whose single
// consumer gets HTTP/2 flow control.
type Search struct {
	stream grpc.BidiStreamingClient[pb.SearchRequest, pb.SearchResponse]
	cancel context.CancelFunc

	sendMu sync.Mutex // guards next and stream.Send
	next   uint64

	// mu guards the fields below and the shared fields of every Results.
	mu      sync.Mutex
	pending map[uint64]*Results
	err     error
	ended   bool // Recv returned: every query has ended
	// receiving is the receiver's role: the one goroutine that may call
	// stream.Recv holds it.
	receiving bool
	// waiters are the goroutines waiting, without the role, for their
	// query or for the stream's end, oldest first; the first is woken to
	// take the role when it falls free.
	waiters []*sync.Cond
}

// QueryError is the error of one query on a Search stream.
type QueryError struct {
	Query uint64
	Code  codes.Code
	Msg   string
	Field string
}

func (e *QueryError) Error() string {
	s := fmt.Sprintf("query %d: %v: %s", e.Query, e.Code, e.Msg)
	return s
}

// GRPCStatus lets status.Code see the query's code.
func (e *QueryError) GRPCStatus() *status.Status { return status.New(e.Code, e.Msg) }

// Results are the results of one query. Not safe for concurrent use by
// several readers; whichever goroutine receives the stream's responses
// fills it concurrently.
//
// The Results of one Batch are allocated together, and a query of one
// batch of records (a primary-key lookup) queues it in first: a batch of
// 1,000 lookups then costs a few allocations, not a few per lookup. A
// Results is never copied (queue may point into its own first).
type Results struct {
	id  uint64
	s   *Search
	cur []*anypb.Any // reader-owned: the batch being read
	// curVer and ver are reader-owned too: cur's versions, and the version
	// of the record Next returned last (Query.versions).
	curVer []uint64
	ver    uint64

	// The fields below are guarded by s.mu.
	ready sync.Cond // on s.mu: its reader waits here
	first [1][]*anypb.Any
	queue [][]*anypb.Any // non-empty batches not yet read
	// vers holds the versions of queue's batches, when the query asked
	// for them: every batch of such a query has them.
	vers  [][]uint64
	ended bool
	err   error
	count uint64
	plan  *pb.Plan
}

// initResults makes rs the Results of len(rs) queries from id on.
func initResults(s *Search, id uint64, rs []Results) {
	for i := range rs {
		r := &rs[i]
		r.id, r.s = id+uint64(i), s
		r.ready.L = &s.mu
		r.queue = r.first[:0]
	}
}

// push queues b's records and wakes the reader, if it waits; s.mu held.
func (r *Results) push(b *pb.ResultBatch) {
	if b.Plan != nil {
		r.plan = b.Plan
	}
	if len(b.Records) > 0 {
		r.queue = append(r.queue, b.Records)
		if len(b.Versions) > 0 {
			r.vers = append(r.vers, b.Versions)
		}
		r.ready.Broadcast()
	}
}

// end ends the query and wakes the reader, if it waits; s.mu held.
func (r *Results) end(count uint64, plan *pb.Plan, err error) {
	r.ended, r.count, r.err = true, count, err
	if plan != nil {
		r.plan = plan
	}
	r.ready.Broadcast()
}

// NewSearch opens a Search stream; ctx bounds its life.
func (c *Client) NewSearch(ctx context.Context) (*Search, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.api.Search(ctx)
	if err != nil {
		cancel()
		return nil, asError(err)
	}
	return &Search{stream: st, cancel: cancel, pending: map[uint64]*Results{}}, nil
}

// Query sends one query in its own request.
func (s *Search) Query(q *pb.Query) (*Results, error) {
	// The Results, the request and its list of one query in one
	// allocation: a lookup at a time is the case where they count.
	one := new(struct {
		r   [1]Results
		qs  [1]*pb.Query
		req pb.SearchRequest
	})
	one.qs[0] = q
	one.req.Queries = one.qs[:]
	if err := s.send(&one.req, one.r[:]); err != nil {
		return nil, err
	}
	return &one.r[0], nil
}

// Batch sends queries in one request, the batching that makes small
// queries fast.
func (s *Search) Batch(qs []*pb.Query) ([]*Results, error) {
	slab := make([]Results, len(qs))
	if err := s.send(&pb.SearchRequest{Queries: qs}, slab); err != nil {
		return nil, err
	}
	rs := make([]*Results, len(slab))
	for i := range slab {
		rs[i] = &slab[i]
	}
	return rs, nil
}

// send makes slab the Results of req's queries, numbered on from the last
// query sent, and sends req.
func (s *Search) send(req *pb.SearchRequest, slab []Results) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	initResults(s, s.next, slab)
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return s.err
	}
	owed := len(s.pending) > 0
	for i := range slab {
		s.pending[slab[i].id] = &slab[i]
	}
	if owed {
		// Earlier queries' responses could fill the flow-control
		// windows and stop the server reading this request.
		s.passRole()
	}
	s.mu.Unlock()
	s.next += uint64(len(slab))
	if err := s.stream.Send(req); err != nil {
		// Send fails with io.EOF when the stream has ended; its status
		// comes from Recv.
		s.mu.Lock()
		defer s.mu.Unlock()
		s.await(nil)
		if s.err != nil {
			return s.err
		}
		return asError(err)
	}
	return nil
}

// Close ends the stream after the results of every query sent so far
// have arrived (read them before or after Close).
func (s *Search) Close() error {
	s.sendMu.Lock()
	err := s.stream.CloseSend()
	s.sendMu.Unlock()
	if err != nil {
		return asError(err)
	}
	s.mu.Lock()
	s.await(nil)
	err = s.err
	s.mu.Unlock()
	s.cancel()
	return err
}

// satisfied reports whether r has a batch to read or has ended, or for a
// nil r whether the stream has ended; s.mu held.
func (s *Search) satisfied(r *Results) bool {
	if r == nil {
		return s.ended
	}
	return len(r.queue) > 0 || r.ended
}

// await returns once r has a batch to read or has ended (for a nil r, once
// the stream has ended), receiving responses itself while no other
// goroutine does; s.mu held, released while it receives or waits.
func (s *Search) await(r *Results) {
	var ready *sync.Cond
	if r != nil {
		ready = &r.ready
	}
	for !s.satisfied(r) && !s.ended {
		if !s.receiving {
			s.receiving = true
			for !s.satisfied(r) && s.receiveOne() {
			}
			s.receiving = false
			continue
		}
		if ready == nil {
			ready = sync.NewCond(&s.mu)
		}
		s.waiters = append(s.waiters, ready)
		ready.Wait()
		s.waiters = slices.DeleteFunc(s.waiters, func(w *sync.Cond) bool { return w == ready })
	}
	s.passRole()
}

// passRole gives the free receiver's role to the first waiter, or, when
// none waits and queries are unfinished, to a background goroutine; s.mu
// held.
func (s *Search) passRole() {
	switch {
	case s.receiving || s.ended:
	case len(s.waiters) > 0:
		s.waiters[0].Signal()
	case len(s.pending) > 0:
		s.receiving = true
		go s.receiveInBackground()
	}
}

// receiveInBackground receives responses while queries are unfinished and
// nobody waits, then gives the role on.
func (s *Search) receiveInBackground() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) > 0 && len(s.waiters) == 0 && s.receiveOne() {
	}
	s.receiving = false
	s.passRole()
}

// receiveOne receives one response and delivers it to its queries, or
// ends every query when the stream has ended; it reports whether the
// stream goes on. The caller holds the receiver's role and s.mu, which is
// released while it waits for the response.
func (s *Search) receiveOne() bool {
	s.mu.Unlock()
	resp, err := s.stream.Recv()
	s.mu.Lock()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = nil
		}
		s.finishAll(asError(err))
		return false
	}
	for _, b := range resp.Results {
		if r := s.pending[b.Query]; r != nil {
			r.push(b)
		}
	}
	for _, d := range resp.Done {
		if r := s.take(d.Query); r != nil {
			r.end(d.Count, d.Plan, nil)
		}
	}
	for _, qe := range resp.Errors {
		if r := s.take(qe.Query); r != nil {
			r.end(0, nil, &QueryError{Query: qe.Query, Code: codes.Code(qe.Code), Msg: qe.Message, Field: qe.Field})
		}
	}
	return true
}

// take removes query id from the pending ones; s.mu held.
func (s *Search) take(id uint64) *Results {
	r := s.pending[id]
	delete(s.pending, id)
	return r
}

// finishAll ends the stream and every pending query with err (or a
// stream-ended error), and wakes every waiter; s.mu held.
func (s *Search) finishAll(err error) {
	if err == nil && len(s.pending) > 0 {
		err = errors.New("search stream ended before every query finished")
	}
	if s.err == nil {
		s.err = err
	}
	s.ended = true
	for id, r := range s.pending {
		r.end(0, nil, err)
		delete(s.pending, id)
	}
	for _, w := range s.waiters {
		w.Signal()
	}
}

// Next returns the next record, io.EOF after the last, or the query's
// error (a *QueryError for a failed query). A record stays valid for as
// long as the caller keeps it, after Close too: nothing reuses its bytes.
// It shares them with the other records of the response that carried it,
// so keeping one record keeps that whole response (of any query on the
// stream) in memory; copy it with proto.Clone to keep it alone.
func (r *Results) Next() (*anypb.Any, error) {
	if err := r.wait(); err != nil {
		return nil, err
	}
	a := r.cur[0]
	r.cur = r.cur[1:]
	r.ver = 0
	if len(r.curVer) > 0 {
		r.ver, r.curVer = r.curVer[0], r.curVer[1:]
	}
	return a, nil
}

// Version is the version of the record Next returned last, when the query
// asked for versions (Query.versions); 0 otherwise.
func (r *Results) Version() uint64 { return r.ver }

// wait makes cur non-empty, waiting for the next batch, or returns io.EOF
// or the query's error.
func (r *Results) wait() error {
	if len(r.cur) > 0 {
		return nil
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.await(r)
	if len(r.queue) > 0 {
		r.cur = r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		if len(r.vers) > 0 {
			r.curVer = r.vers[0]
			r.vers = r.vers[1:]
		}
		return nil
	}
	if r.err != nil {
		return r.err
	}
	return io.EOF
}

// All reads the remaining records. The result of a query answered in one
// batch is that batch's slice itself, not a copy. It returns no versions:
// read a query that asks for them with Next and Version.
func (r *Results) All() ([]*anypb.Any, error) {
	var out []*anypb.Any
	for {
		err := r.wait()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if out == nil {
			out = r.cur
		} else {
			out = append(out, r.cur...)
		}
		r.cur, r.curVer = nil, nil
	}
}

// Count is the server's count of matches; valid after Next returned io.EOF.
func (r *Results) Count() uint64 {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.count
}

// Plan is the query's plan when it asked for explain; valid after the
// first record or the end.
func (r *Results) Plan() *pb.Plan {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.plan
}

// ID is the query's id on the stream.
func (r *Results) ID() uint64 { return r.id }
