package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/recordcache"
	"github.com/protobase/protobase/internal/store"
)

// compiled is a validated query with its plan, bound to one catalog.
type compiled struct {
	q    *pb.Query
	t    *recType
	plan *query.Plan
}

// compile validates q against the current schema and plans it. Only READY
// indexes are offered to the planner.
func (e *Engine) compile(q *pb.Query) (*compiled, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	return e.compileIn(e.cat.Load(), q)
}

// compileIn is compile against the catalog cat: a write batch's query
// conditions are compiled against the catalog its records are.
func (e *Engine) compileIn(cat *catalog, q *pb.Query) (*compiled, error) {
	if q == nil {
		return nil, &apierror.Error{Code: apierror.InvalidArgument, Msg: "query is missing"}
	}
	if q.GetAggregate() != nil {
		return nil, &apierror.Error{Code: apierror.InvalidArgument, Field: "query.aggregate",
			Msg: "aggregate: only Query answers aggregates (not Search, Scan or a write condition)"}
	}
	text := q.GetFilter()
	q, err := withFilter(q)
	if err != nil {
		return nil, err
	}
	return e.compileParsed(cat, q, text)
}

// compileParsed compiles q, whose text filter, if it had one, is parsed
// into its where: text is that filter, for errors that point into it.
func (e *Engine) compileParsed(cat *catalog, q *pb.Query, text string) (*compiled, error) {
	t := cat.lookup(q.GetType())
	if t == nil || q.GetType() == "" {
		return nil, &apierror.Error{Code: apierror.NotFound, Msg: "no record type " + quote(q.GetType()) + " in the schema"}
	}
	plan, err := query.Compile(q, t.target, e.opts.QueryLimits)
	if err != nil {
		var qe *query.Error
		if errors.As(err, &qe) {
			ae := &apierror.Error{Code: apierror.InvalidArgument, Msg: qe.Error(), Field: qe.Field, Err: err}
			if text != "" {
				ae.Msg = inFilter(text, qe)
				ae.Details = filterViolation(strings.TrimPrefix(ae.Msg, "filter: "))
			}
			return nil, ae
		}
		return nil, &apierror.Error{Code: apierror.InvalidArgument, Msg: err.Error(), Err: err}
	}
	return &compiled{q: q, t: t, plan: plan}, nil
}

// pointScratch lets a worker serve plain primary-key lookups without
// compiling them: one plan of one range, reused query after query, so a
// point lookup allocates nothing before its read. It belongs to one worker.
type pointScratch struct {
	c    compiled
	plan query.Plan
	rg   [1]query.Range
	key  []byte
	// buf holds a short key for a scratch used once (a unary Query's),
	// which then allocates once in all.
	buf [40]byte
}

// compileFast is compile with the primary-key fast path: query.Point
// recognises "pk = value" and encodes its key; anything else, including
// every invalid query, is compiled. The result is valid until the next
// call with the same scratch.
func (e *Engine) compileFast(q *pb.Query, s *pointScratch) (*compiled, error) {
	if q == nil || q.GetAggregate() != nil || e.closed.Load() {
		return e.compile(q) // for its errors
	}
	// A text filter is parsed once: "id == 42" is then the same plain
	// lookup as its where, and anything else is planned from the parse.
	text := q.GetFilter()
	q, err := withFilter(q)
	if err != nil {
		return nil, err
	}
	cat := e.cat.Load()
	if t := cat.lookup(q.GetType()); t != nil && t.point != nil {
		if key, ok := t.point.Key(s.key[:0], q); ok {
			s.key = key
			return s.point(t, key, q), nil
		}
	}
	return e.compileParsed(cat, q, text)
}

// point fills the scratch with the plan of q, a lookup of t's record key
// key that query.Point accepted, and returns it.
func (s *pointScratch) point(t *recType, key []byte, q *pb.Query) *compiled {
	// End is left nil: points reads Start alone.
	s.rg[0] = query.Range{Start: key}
	s.plan = query.Plan{
		Access:   query.AccessPKPoint,
		Ranges:   s.rg[:],
		Reverse:  q.GetOrder().GetDescending(),
		Limit:    q.GetLimit(),
		KeysOnly: q.GetKeysOnly(),
		Count:    q.GetCount(),
	}
	s.c = compiled{q: q, t: t, plan: &s.plan}
	return &s.c
}

// cursor runs a plan on one reader. It is not safe for concurrent use; it
// reuses its iterator and buffers across ranges.
type cursor struct {
	e  *Engine
	c  *compiled
	r  store.View
	it store.Iterator
	// pit, when set, serves point reads (see points); its owner closes it.
	// pitGen is the cache generation taken before pit was made: pit's
	// state is that old, so reads through it are offered to the cache
	// with that generation.
	pit    store.Iterator
	pitGen uint64
	// pk, when set, receives point reads: values land in its buffer, and
	// it packs them without a copy.
	pk *packer
	// rit reads the records an index range points to; run closes it.
	rit store.Iterator
	buf []byte // record read through an index
	out []byte // keys-only record
	n   uint64 // matches emitted
	// Counts for Stats, added to the engine's shared counters once per
	// query or chunk (flushStats), not once per record.
	lookups, read uint64
	// onRead, when set, is given read at each flushStats (a Scan sums
	// its parts' for its slow-query line).
	onRead func(read uint64)
	// cacheMisses counts the lone-key lookups the record cache did not
	// serve (see Engine.sortPoints).
	cacheMisses uint64
	ib          *indexBatchBuf // an index range's batch (scanIndex), pooled
	// want, when not 0, is how many matches the caller takes before it
	// stops (a page and the match past it): an index range then reads
	// its first batches small (scanIndex).
	want int
	// staged, when set, holds the record cache's answer for the current
	// query's lone key at position stagedAt, looked up with the rest of
	// its chunk (stageLookups).
	staged   *recordcache.Batch
	stagedAt int
	// wantVer says the query asks for versions (Query.versions): every
	// record read then sets ver, the version of the record emit is given.
	wantVer bool
	ver     uint64
	// now is the time a run compares record expiries with (set by run
	// when the type has a ttl option, unless inBatch).
	now instant
	// inBatch says the cursor reads for a write batch's conditions: at the
	// batch's clock reading, and without waiting for the versions it reads
	// to be durable (awaitDurable), which the batch, committed after them,
	// cannot outlive.
	inBatch bool
	// ms, set on the first record read through an index on a repeated
	// field, is seenEarlier's scratch.
	ms *multiScratch
}

// flushStats adds the cursor's counts to the engine's Stats.
func (cu *cursor) flushStats() {
	if cu.onRead != nil {
		cu.onRead(cu.read)
	}
	if cu.lookups > 0 {
		cu.e.stats.PointLookups.Add(cu.lookups)
	}
	if cu.read > 0 {
		cu.e.stats.RecordsRead.Add(cu.read)
	}
	cu.lookups, cu.read = 0, 0
}

// run iterates ranges in plan order, skipping keys up to and including
// after (forward) or from after on (reverse), and calls emit with the
// access-path key and the record bytes of every match. Both are valid only
// during the call. It stops at the plan's limit, when emit returns false,
// or when ctx is done.
func (cu *cursor) run(ctx context.Context, ranges []query.Range, after []byte, emit func(key, rec []byte) bool) error {
	p := cu.c.plan
	cu.wantVer = cu.c.q.GetVersions()
	if cu.c.t.exp != nil && !cu.inBatch {
		cu.now = cu.e.now()
	}
	if p.Access == query.AccessPKPoint && after == nil {
		return cu.points(ctx, ranges, emit)
	}
	defer func() {
		if cu.it != nil {
			cu.it.Close()
			cu.it = nil
		}
		if cu.rit != nil {
			cu.rit.Close()
			cu.rit = nil
		}
		if cu.ib != nil {
			indexBatches.Put(cu.ib)
			cu.ib = nil
		}
	}()
	for i := range ranges {
		rg := ranges[i]
		if p.Reverse {
			rg = ranges[len(ranges)-1-i]
		}
		lo, hi := rg.Start, rg.End
		if after != nil {
			if p.Reverse {
				if bytes.Compare(after, hi) < 0 || hi == nil {
					hi = after
				}
			} else if bytes.Compare(after, lo) >= 0 {
				lo = append(append([]byte(nil), after...), 0)
			}
			if hi != nil && bytes.Compare(lo, hi) >= 0 {
				continue
			}
		}
		if cu.it == nil {
			it, err := cu.r.NewIterator(lo, hi)
			if err != nil {
				return err
			}
			cu.it = it
		} else {
			cu.it.SetBounds(lo, hi)
		}
		more, err := cu.scan(ctx, emit)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scan walks the current iterator; it reports whether to go on.
func (cu *cursor) scan(ctx context.Context, emit func(key, rec []byte) bool) (bool, error) {
	p := cu.c.plan
	if p.Access == query.AccessIndexRange {
		return cu.scanIndex(ctx, emit)
	}
	it, back := cu.it, p.Reverse
	for ok := cu.start(); ok; {
		// A canceled scan stops within a few dozen records: checking for
		// every one cost 2 % of an aggregation's time.
		if cu.read%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return false, err
			}
		}
		cu.read++
		if cu.wantVer {
			cu.ver = it.Version()
		}
		if more, err := cu.match(ctx, it.Key(), it.Value(), emit); err != nil || !more {
			return false, err
		}
		if back {
			ok = it.Prev()
		} else {
			ok = it.Next()
		}
	}
	return true, it.Error()
}

// start positions the iterator on the first key in plan order.
func (cu *cursor) start() bool {
	if cu.c.plan.Reverse {
		return cu.it.Last()
	}
	return cu.it.First()
}

// ctxEvery is how many records a scan reads between looks at its context.
const ctxEvery = 64

func (cu *cursor) step() bool {
	if cu.c.plan.Reverse {
		return cu.it.Prev()
	}
	return cu.it.Next()
}

// points serves primary-key point plans with a point read per key: no
// range iteration. Several keys are read through one iterator (cheaper
// than as many Gets, see internal/store/pebble's Iter.Lookup): the
// caller's pit if set, else one made for the call; a lone key is a plain
// Get.
func (cu *cursor) points(ctx context.Context, ranges []query.Range, emit func(key, rec []byte) bool) error {
	p := cu.c.plan
	it := cu.pit
	if it == nil && len(ranges) > 1 {
		var err error
		if it, err = cu.r.NewIterator(nil, nil); err != nil {
			return err
		}
		defer it.Close()
	}
	for i := range ranges {
		rg := ranges[i]
		if p.Reverse {
			rg = ranges[len(ranges)-1-i]
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		cu.lookups++
		dst := cu.buf[:0]
		if cu.pk != nil {
			dst = cu.pk.tail()
		}
		val, found, err := cu.point(it, rg.Start, dst, len(ranges) == 1)
		if cu.pk != nil {
			cu.pk.readInto(val)
		} else {
			cu.buf = val
		}
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		cu.read++
		if more, err := cu.match(ctx, rg.Start, val, emit); err != nil || !more {
			return err
		}
	}
	return nil
}

// point reads key through it, or with a Get when it is nil. A lone key
// (cached) is served from the record cache when there, and a record read
// for it from the latest state is offered to the cache. A query of several
// keys reads them all from its one iterator, never mixing in the cache's
// newer state.
func (cu *cursor) point(it store.Iterator, key, dst []byte, cached bool) ([]byte, bool, error) {
	if cu.wantVer {
		return cu.pointVersioned(it, key, dst)
	}
	c := cu.e.cache
	if !cached || c == nil || cu.r != store.View(cu.e.st) {
		if it != nil {
			return it.Lookup(key, dst)
		}
		return cu.r.Get(key, dst)
	}
	if cu.staged != nil {
		val, hit := cu.staged.Val(cu.stagedAt)
		cu.staged = nil
		if hit {
			return append(dst[:0], val...), true, nil
		}
	} else if val, hit := c.Get(key, dst); hit {
		return val, true, nil
	}
	cu.cacheMisses++
	var val []byte
	var found bool
	var err error
	gen := cu.pitGen
	if it != nil {
		val, found, err = it.Lookup(key, dst)
	} else {
		gen = c.Gen()
		val, found, err = cu.r.Get(key, dst)
	}
	if found && err == nil {
		c.Fill(key, val, gen)
	}
	return val, found, err
}

// pointVersioned is point for a query that asks for versions: the
// record cache holds no versions, so it reads the store, and sets cu.ver.
func (cu *cursor) pointVersioned(it store.Iterator, key, dst []byte) (val []byte, found bool, err error) {
	cu.staged = nil
	if it != nil {
		val, found, err = it.Lookup(key, dst)
		cu.ver = it.Version()
		return val, found, err
	}
	val, cu.ver, found, err = cu.r.GetVersioned(key, dst)
	return val, found, err
}

// match drops expired records and applies the residual filter and the
// limit; a record emitted with its version waits for that to be durable.
func (cu *cursor) match(ctx context.Context, key, rec []byte, emit func(key, rec []byte) bool) (bool, error) {
	p := cu.c.plan
	if cu.c.t.expired(rec, cu.now) {
		return true, nil
	}
	if p.Filter != nil {
		ok, err := p.Filter.Match(rec)
		if err != nil {
			return false, &apierror.Error{Code: apierror.Internal, Msg: "stored record unreadable: " + err.Error(), Err: err}
		}
		if !ok {
			return true, nil
		}
	}
	if p.KeysOnly {
		cu.out = record.AppendFields(cu.out[:0], rec, cu.c.t.pkNums)
		rec = cu.out
	}
	if cu.wantVer && !cu.inBatch {
		if err := cu.e.awaitDurable(ctx, cu.ver); err != nil {
			return false, err
		}
	}
	cu.n++
	if !emit(key, rec) {
		return false, nil
	}
	return p.Limit == 0 || cu.n < p.Limit, nil
}

// reader picks what a query reads from: a single point lookup needs no
// snapshot (one Get is atomic); anything else gets its own snapshot.
func (e *Engine) reader(c *compiled) (store.View, func(), error) {
	if c.plan.Access == query.AccessPKPoint && len(c.plan.Ranges) <= 1 {
		return e.st, func() {}, nil
	}
	snap, err := e.st.OpenSnapshot()
	if err != nil {
		return nil, nil, storeError(err)
	}
	return snap, func() { snap.Close() }, nil
}
