package engine

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/apierror"
)

// The write budget (Options.MaxInflightBytes) counts the memory of write
// requests from the moment a transport has decoded one until its batch is
// durable:
//
//   - the decoded request: its record bytes, from ReserveRequest (or, for
//     a transport that does not reserve, from Apply) until Apply returns
//     and the transport lets go of the request;
//   - the storage batch Apply builds: the records again, their keys and
//     index entries, and the change log's entry (the records once more,
//     and for an update the old records), from its commit until it is
//     durable (Sync, or Apply bounding the batches in flight). It is
//     taken whether or not it fits (budget.force): it exists already, and
//     a writer waiting on a budget its own unsynced batches hold would
//     wait forever. Later requests then wait for it.
//
// A request waits for room in the budget, which stops its stream from
// reading and pushes back on the client through flow control. While it
// waits it is decoded already: the requests waiting are bounded too, by
// as many bytes again (the waiting room); a request that finds the
// waiting room full is refused with RESOURCE_EXHAUSTED. So what write
// streams hold, whatever clients do, is at most twice MaxInflightBytes
// plus what the budget was forced past (one storage batch per writer
// being committed at that moment).

// Reserved is bytes of the write budget taken for one decoded request
// (ReserveRequest). Writer.Use hands it to the stream's next Apply, which
// gives it back when it returns; a request never applied is given back
// with Release.
type Reserved struct {
	e *Engine
	n int64
}

// Release gives the bytes back; a zero Reserved holds none.
func (r Reserved) Release() {
	if r.n > 0 {
		r.e.inflight.release(r.n)
	}
}

// errWriteBuffersFull refuses a request that finds the waiting room full.
var errWriteBuffersFull = apierror.New(apierror.ResourceExhausted,
	"the server's write buffers are full (write requests waiting for room in the write budget fill the room they may wait in); retry later")

// RecordBytes is what a write request's records count against the write
// budget: their bytes and type URLs.
func RecordBytes(recs []*anypb.Any) int64 {
	var size int64
	for _, a := range recs {
		size += int64(len(a.GetValue()) + len(a.GetTypeUrl()))
	}
	return size
}

// writeBudgetWait is how long a write request waits for room in the
// write budget before it is refused with RESOURCE_EXHAUSTED: backpressure
// first, an error last, so that writers behind clients that hold the
// budget (by not reading their acknowledgements, say) are not stuck.
const writeBudgetWait = 30 * time.Second

// ReserveRequest takes n bytes of the write budget for a write request a
// stream has decoded ahead of its Apply (RecordBytes), waiting for room
// (see reserveWrite). A request over the whole budget reserves nothing:
// Apply refuses it, naming its batch.
func (e *Engine) ReserveRequest(ctx context.Context, n int64) (Reserved, error) {
	if r, ok := e.TryReserveRequest(n); ok {
		return r, nil
	}
	if err := e.reserveWrite(ctx, n, nil); err != nil {
		return Reserved{}, err
	}
	return Reserved{e: e, n: n}, nil
}

// TryReserveRequest is ReserveRequest without the wait: ok is false,
// and nothing taken, when the bytes do not fit now.
func (e *Engine) TryReserveRequest(n int64) (r Reserved, ok bool) {
	if n <= 0 || n > e.opts.MaxInflightBytes {
		return Reserved{}, true
	}
	if !e.inflight.tryAcquire(n) {
		return Reserved{}, false
	}
	return Reserved{e: e, n: n}, true
}

// reserveWrite takes n bytes of the write budget. When they do not fit,
// relieve (when not nil) first gives back what the caller itself holds
// (its unsynced batches: waiting on them would be waiting on itself); then
// the request waits, at most writeBudgetWait, in the waiting room. A
// request that finds the waiting room full, or waits too long, is
// RESOURCE_EXHAUSTED.
func (e *Engine) reserveWrite(ctx context.Context, n int64, relieve func() error) error {
	if e.inflight.tryAcquire(n) {
		return nil
	}
	if relieve != nil {
		if err := relieve(); err != nil {
			return err
		}
		if e.inflight.tryAcquire(n) {
			return nil
		}
	}
	if !e.waiting.tryAcquire(n) {
		return errWriteBuffersFull
	}
	defer e.waiting.release(n)
	wctx, cancel := context.WithTimeout(ctx, writeBudgetWait)
	defer cancel()
	if err := e.inflight.acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errWriteBudgetWait
	}
	return nil
}

// errWriteBudgetWait refuses a request that waited writeBudgetWait.
var errWriteBudgetWait = apierror.New(apierror.ResourceExhausted,
	"the server's write buffers stayed full for "+writeBudgetWait.String()+" (other writers' batches hold them); retry later")

// Use hands r to the stream's next Apply (or Abort, or Close, which give
// it back unused).
func (w *Writer) Use(r Reserved) {
	w.reserved.Release() // one at a time: an unused one is not kept
	w.reserved = r
}

// takeReserved returns the bytes of the write budget the request Apply
// applies now holds: those handed with Use when they cover size, else
// size taken now (reserveWrite, the writer's unsynced batches given back
// first if need be).
func (w *Writer) takeReserved(ctx context.Context, size int64) (int64, error) {
	r := w.reserved
	w.reserved = Reserved{}
	if r.n >= size {
		return r.n, nil
	}
	r.Release()
	if err := w.e.reserveWrite(ctx, size, w.syncPending); err != nil {
		return 0, err
	}
	return size, nil
}

// syncPending waits for the writer's unsynced batches, which gives back
// what they hold of the write budget.
func (w *Writer) syncPending() error {
	_, err := w.Sync()
	return err
}
