package client

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// Results are received in the background and queued per query until read,
// so queries can be read in any order, or not at all, without stalling the
// others: one stream carries every query's results interleaved, and a
// bounded per-query buffer would let one unread query block the delivery
// of the query being read (a deadlock). The cost is memory: results that
// arrived and were not read stay queued. For result sets larger than
// memory, use Scan, whose single consumer gets HTTP/2 flow control.
type Search struct {
	stream grpc.BidiStreamingClient[pb.SearchRequest, pb.SearchResponse]
	cancel context.CancelFunc

	sendMu sync.Mutex // guards next and stream.Send
	next   uint64

	mu      sync.Mutex // guards pending and err
	pending map[uint64]*Results
	err     error
	done    chan struct{}
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
// several readers; the stream's receiver fills it concurrently.
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

	mu    sync.Mutex // guards the fields below
	ready sync.Cond  // on mu: broadcast after every push and at the end
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

// newResults returns the Results of n queries from id on.
func newResults(s *Search, id uint64, n int) []Results {
	rs := make([]Results, n)
	for i := range rs {
		r := &rs[i]
		r.id, r.s = id+uint64(i), s
		r.ready.L = &r.mu
		r.queue = r.first[:0]
	}
	return rs
}

// push queues b's records. The receiver wakes the reader (wake) once it
// has delivered the whole response.
func (r *Results) push(b *pb.ResultBatch) {
	r.mu.Lock()
	if b.Plan != nil {
		r.plan = b.Plan
	}
	if len(b.Records) > 0 {
		r.queue = append(r.queue, b.Records)
		if len(b.Versions) > 0 {
			r.vers = append(r.vers, b.Versions)
		}
	}
	r.mu.Unlock()
}

// end ends the query; the caller wakes the reader (wake).
func (r *Results) end(count uint64, plan *pb.Plan, err error) {
	r.mu.Lock()
	r.ended, r.count, r.err = true, count, err
	if plan != nil {
		r.plan = plan
	}
	r.mu.Unlock()
}

// wake wakes the reader waiting for r, if any.
func (r *Results) wake() { r.ready.Broadcast() }

// NewSearch opens a Search stream; ctx bounds its life.
func (c *Client) NewSearch(ctx context.Context) (*Search, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.api.Search(ctx, readCall)
	if err != nil {
		cancel()
		return nil, asError(err)
	}
	s := &Search{stream: st, cancel: cancel, pending: map[uint64]*Results{}, done: make(chan struct{})}
	go s.receive()
	return s, nil
}

// Query sends one query in its own request.
func (s *Search) Query(q *pb.Query) (*Results, error) {
	rs, err := s.Batch([]*pb.Query{q})
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// Batch sends queries in one request, the batching that makes small
// queries fast.
func (s *Search) Batch(qs []*pb.Query) ([]*Results, error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	rs := make([]*Results, len(qs))
	slab := newResults(s, s.next, len(qs))
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, s.err
	}
	for i := range slab {
		r := &slab[i]
		s.pending[r.id] = r
		rs[i] = r
	}
	s.mu.Unlock()
	s.next += uint64(len(qs))
	if err := s.stream.Send(&pb.SearchRequest{Queries: qs}); err != nil {
		<-s.done
		return nil, s.failure(err)
	}
	return rs, nil
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
	<-s.done
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Search) failure(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return asError(err)
}

// receive delivers every response to its queries. A query's readers are
// woken once the whole response is delivered: a lookup's record and its
// end come in one response, and a reader woken by the record alone would
// wait, and be woken, a second time for the end.
func (s *Search) receive() {
	defer close(s.done)
	var woken []*Results
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			s.finishAll(asError(err))
			return
		}
		for _, b := range resp.Results {
			if r := s.lookup(b.Query); r != nil {
				r.push(b)
				woken = append(woken, r)
			}
		}
		for _, d := range resp.Done {
			if r := s.take(d.Query); r != nil {
				r.end(d.Count, d.Plan, nil)
				woken = append(woken, r)
			}
		}
		for _, qe := range resp.Errors {
			if r := s.take(qe.Query); r != nil {
				r.end(0, nil, &QueryError{Query: qe.Query, Code: codes.Code(qe.Code), Msg: qe.Message, Field: qe.Field})
				woken = append(woken, r)
			}
		}
		for i, r := range woken {
			r.wake()
			woken[i] = nil
		}
		woken = woken[:0]
	}
}

func (s *Search) lookup(id uint64) *Results {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[id]
}

func (s *Search) take(id uint64) *Results {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.pending[id]
	delete(s.pending, id)
	return r
}

// finishAll ends every pending query with err (or a stream-ended error).
func (s *Search) finishAll(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && len(s.pending) > 0 {
		err = errors.New("search stream ended before every query finished")
	}
	if s.err == nil {
		s.err = err
	}
	for id, r := range s.pending {
		r.end(0, nil, err)
		r.wake()
		delete(s.pending, id)
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
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.queue) == 0 && !r.ended {
		r.ready.Wait()
	}
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
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Plan is the query's plan when it asked for explain; valid after the
// first record or the end.
func (r *Results) Plan() *pb.Plan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plan
}

// ID is the query's id on the stream.
func (r *Results) ID() uint64 { return r.id }
