package engine

import (
	"context"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/store"
)

// A request of plain primary-key lookups run on the receiving goroutine,
// on a transport that sends wire bytes (SearchIO.SendWire), has its
// responses written as wire bytes straight from the records' bytes: each
// record is copied once, from the record cache's entry (or the store's
// read) into the response, with no ResultBatch, QueryDone or Any message
// built, sized and encoded per lookup. Those were a quarter of the
// server's CPU on batched lookups, and the packer's and encoder's copies
// of each record another tenth. The bytes are proto.Marshal's encoding of
// the response the message path builds (TestLookupEncMatchesProto), so
// clients cannot tell the paths apart.

// Field numbers of SearchResponse and the messages in it.
const (
	fieldSearchResults = 1 // SearchResponse.results
	fieldSearchDone    = 2 // SearchResponse.done
	fieldSearchErrors  = 3 // SearchResponse.errors

	fieldResultQuery   = 1 // ResultBatch.query
	fieldResultRecords = 2 // ResultBatch.records

	fieldDoneQuery = 1 // QueryDone.query
	fieldDoneCount = 2 // QueryDone.count
)

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
}

// lookupEncs pools the engine's lookupEncs, so that their buffers follow
// the requests running, not the streams open (a stream opened for a few
// requests would grow new ones each time); idle ones go with the GC.
var lookupEncs = sync.Pool{New: func() any { return new(lookupEnc) }}

func (w *lookupEnc) empty() bool { return len(w.out) == 0 && len(w.dones) == 0 && len(w.errs) == 0 }

// result adds query id's one record, of type URL url.
func (w *lookupEnc) result(id uint64, url string, rec []byte) {
	anyLen := sizeLenField(len(url)) + sizeLenField(len(rec))
	batchLen := sizeVarintField(id) + 1 + protowire.SizeBytes(anyLen)
	b := w.out
	b = protowire.AppendTag(b, fieldSearchResults, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(batchLen))
	if id != 0 {
		b = protowire.AppendTag(b, fieldResultQuery, protowire.VarintType)
		b = protowire.AppendVarint(b, id)
	}
	b = protowire.AppendTag(b, fieldResultRecords, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(anyLen))
	if len(url) > 0 {
		b = protowire.AppendTag(b, fieldAnyURL, protowire.BytesType)
		b = protowire.AppendString(b, url)
	}
	if len(rec) > 0 {
		b = protowire.AppendTag(b, fieldAnyValue, protowire.BytesType)
		b = protowire.AppendBytes(b, rec)
	}
	w.out = b
	w.recs++
	w.bytes += len(rec) + len(url) + 8
}

// done adds query id's completion with count matches.
func (w *lookupEnc) done(id, count uint64) {
	b := protowire.AppendTag(w.dones, fieldSearchDone, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(sizeVarintField(id)+sizeVarintField(count)))
	if id != 0 {
		b = protowire.AppendTag(b, fieldDoneQuery, protowire.VarintType)
		b = protowire.AppendVarint(b, id)
	}
	if count != 0 {
		b = protowire.AppendTag(b, fieldDoneCount, protowire.VarintType)
		b = protowire.AppendVarint(b, count)
	}
	w.dones = b
}

// fail adds a query's error.
func (w *lookupEnc) fail(qe *pb.QueryError) {
	size := proto.Size(qe)
	b := protowire.AppendTag(w.errs, fieldSearchErrors, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, qe) // our own message: it encodes
	w.errs = b
}

// finish returns the response's bytes, valid until the next reset.
func (w *lookupEnc) finish() []byte {
	w.out = append(append(w.out, w.dones...), w.errs...)
	return w.out
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
}

func sizeVarintField(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

func sizeLenField(n int) int {
	if n == 0 {
		return 0
	}
	return 1 + protowire.SizeBytes(n)
}

// wireLookups runs a request of n plain primary-key lookups (their keys
// in buf, from allPoints or wirePoints) whose first query has id first,
// writing its responses as wire bytes and sending them with deliver, which
// reports whether the stream goes on. It keeps the message path's bounds: each
// response holds a response's bytes of the result budget while it is
// built, and at most MaxResultRecords records and about MaxResultBytes.
func (e *Engine) wireLookups(ctx context.Context, n int, first uint64, buf *lookupBuf, deliver func(b []byte, held int64) bool) bool {
	points := buf.points
	buf.ready = false
	e.stats.Queries.Add(uint64(n))
	staged := e.stageLookups(points, buf)
	w := lookupEncs.Get().(*lookupEnc)
	defer lookupEncs.Put(w)
	w.reset()
	var held int64
	var exhausted bool
	var pit store.Iterator
	var pitGen uint64
	defer func() {
		if pit != nil {
			pit.Close()
		}
		e.results.Release(held)
	}()
	var found, misses uint64
	var dst, keys []byte
	flush := func() bool {
		if w.empty() {
			return true
		}
		if extra := int64(w.bytes) - held; extra > 0 { // a record larger than the bound
			extra = min(extra, e.opts.MaxResultBufferBytes-held)
			if err := e.results.Acquire(ctx, extra); err != nil {
				return false
			}
			held += extra
		}
		h := held
		held = 0 // deliver gives it back, sent or not
		ok := deliver(w.finish(), h)
		w.reset()
		return ok
	}
	want := min(int64(e.opts.MaxResultBytes), e.opts.MaxResultBufferBytes)
	for k := range points {
		p := &points[k]
		id := first + uint64(p.i)
		if held < want {
			if err := e.acquireResult(ctx, want-held, &exhausted); err != nil {
				if ctx.Err() != nil {
					return false
				}
				e.stats.QueryErrors.Add(1)
				w.fail(queryError(id, err))
				continue
			}
			held = want
		}
		var val []byte
		var ok bool
		if staged != nil {
			val, ok = staged.Val(k)
		} else {
			val, ok = e.cache.Get(p.key, dst[:0])
			dst = val
		}
		if !ok {
			misses++
			if pit == nil {
				pitGen = e.cache.Gen()
				var err error
				if pit, err = e.st.NewIterator(nil, nil); err != nil {
					pit = nil
					e.stats.QueryErrors.Add(1)
					w.fail(queryError(id, storeError(err)))
					continue
				}
			}
			var err error
			if val, ok, err = pit.Lookup(p.key, dst[:0]); err != nil {
				e.stats.QueryErrors.Add(1)
				w.fail(queryError(id, storeError(err)))
				continue
			}
			dst = val
			if ok {
				e.cache.Fill(p.key, val, pitGen)
			}
		}
		if !ok {
			w.done(id, 0)
			continue
		}
		found++
		if !p.count {
			if p.keysOnly {
				keys = record.AppendFields(keys[:0], val, p.t.pkNums)
				val = keys
			}
			if w.recs >= e.opts.MaxResultRecords || w.bytes+len(val) > e.opts.MaxResultBytes && w.recs > 0 {
				if !flush() {
					return false
				}
				if err := e.acquireResult(ctx, want, &exhausted); err != nil {
					if ctx.Err() != nil {
						return false
					}
					e.stats.QueryErrors.Add(1)
					w.fail(queryError(id, err))
					continue
				}
				held = want
			}
			w.result(id, p.t.url, val)
		}
		w.done(id, 1)
	}
	e.stats.PointLookups.Add(uint64(len(points)))
	e.stats.RecordsRead.Add(found)
	if !flush() {
		return false
	}
	if len(points) > 0 && e.cache != nil {
		e.sortPoints.Store(misses*8 > uint64(len(points)))
	}
	return ctx.Err() == nil
}
