package engine

import (
	"context"
	"math"
	"sync/atomic"

	"github.com/protobase/protobase/internal/apierror"
)

// The result budget (Options.MaxResultBufferBytes) counts the bytes of
// every response of Search, Scan, Watch and Export from before its first
// record is copied into it until the transport no longer holds them. A
// response reserves a full response's bytes (MaxResultBytes) before it is
// built, and a record larger than what the response holds is covered
// before it is copied (cover): a 30 MiB record counts 30 MiB, not the
// response bound. Once built, a response's reservation is cut to what it
// really holds (trim) and goes with it to the transport as a Hold, which
// gives it back only once the bytes are gone: gRPC when it has written
// them to the connection (or the connection has ended), other transports
// when their Send returns. So a client that does not read holds, whatever
// its records' sizes, what the budget lets it hold.

// Hold is the bytes of the server's result budget one response holds.
// The transport that sends the response calls Release exactly once, when
// it no longer holds the response's bytes (a copy included). The zero
// Hold holds nothing.
type Hold struct {
	e *Engine
	n int64
}

// Bytes returns the bytes held.
func (h Hold) Bytes() int64 { return h.n }

// Release gives the bytes back to the budget.
func (h Hold) Release() {
	if h.n > 0 {
		h.e.results.Release(h.n)
	}
}

// HeldSum is what the responses in one holder's care hold of the result
// budget together, for a holder that may end while some are still in its
// care (a connection that closes with responses queued): Add takes a
// response's Hold into it, Return gives one back when its bytes are gone,
// and End gives back everything not yet returned and turns later Returns
// into no-ops, so that each byte goes back exactly once. Atomic counts,
// not a list: responses are added and returned at every send, on every
// stream of the holder, and a lock and list links shared by them all cost
// more than the answer's own bookkeeping. The zero HeldSum is empty. It is
// safe for concurrent use.
type HeldSum struct {
	e atomic.Pointer[Engine]
	n atomic.Int64 // held bytes; heldEnded once ended
}

// heldEnded marks an ended HeldSum; held bytes are never negative.
const heldEnded = math.MinInt64

// Add takes h into s and reports true; or, once s has ended, gives h back
// at once and reports false. Every Hold added comes from one engine.
func (s *HeldSum) Add(h Hold) bool {
	if h.n > 0 && s.e.Load() == nil {
		s.e.CompareAndSwap(nil, h.e)
	}
	for {
		cur := s.n.Load()
		if cur < 0 {
			h.Release()
			return false
		}
		if s.n.CompareAndSwap(cur, cur+h.n) {
			return true
		}
	}
}

// Return gives back h, added to s before, unless s has ended (End gave
// it back then).
func (s *HeldSum) Return(h Hold) {
	for {
		cur := s.n.Load()
		if cur < 0 {
			return
		}
		if s.n.CompareAndSwap(cur, cur-h.n) {
			h.Release()
			return
		}
	}
}

// End gives back what the Holds added and not returned hold; later Adds
// give their Holds back at once, and a later End gives back nothing.
func (s *HeldSum) End() {
	if n := s.n.Swap(heldEnded); n > 0 {
		s.e.Load().results.Release(n)
	}
}

// hold is what a response being built holds of the result budget, and
// whether a wait for it timed out, so that the request's later queries
// fail at once instead of each waiting again.
type hold struct {
	n         int64
	exhausted bool
}

// reserve makes h hold at least a full response's bytes, waiting at most
// resultBudgetWait.
func (e *Engine) reserve(ctx context.Context, h *hold) error {
	want := min(int64(e.opts.MaxResultBytes), e.opts.MaxResultBufferBytes)
	if h.n >= want {
		return nil
	}
	if err := e.acquireResult(ctx, want-h.n, &h.exhausted); err != nil {
		return err
	}
	h.n = want
	return nil
}

// cover makes h hold at least need bytes, the size of the response with
// the record about to be copied into it. empty says the response holds no
// record yet: then what h holds is given back before the wait, so that a
// response waiting for room for a large record holds nothing meanwhile.
// A record too large for the whole budget fails its query.
func (e *Engine) cover(ctx context.Context, h *hold, need int64, empty bool) error {
	if need <= h.n {
		return nil
	}
	if err := e.overBudget(need); err != nil {
		return err
	}
	if empty && h.n > 0 {
		e.results.Release(h.n)
		h.n = 0
	}
	if err := e.acquireResult(ctx, need-h.n, &h.exhausted); err != nil {
		return err
	}
	h.n = need
	return nil
}

// overBudget refuses a response of need bytes that the whole result
// budget could not hold.
func (e *Engine) overBudget(need int64) error {
	if need <= e.opts.MaxResultBufferBytes {
		return nil
	}
	return apierror.Errorf(apierror.ResourceExhausted,
		"a response of %d bytes (a record of about that size) is larger than the server's result buffers of %d bytes (max result buffer bytes)",
		need, e.opts.MaxResultBufferBytes)
}

// MinHeld is the least a built response keeps of its reservation: the
// bytes a response holds besides its records (completions, errors,
// framing) are not counted one by one.
const MinHeld = 4 << 10

// take cuts h to the size of the response it was reserved for, which
// holds size bytes of records, and hands it over as a Hold; h then holds
// nothing.
func (e *Engine) take(h *hold, size int) Hold {
	keep := min(h.n, max(int64(size)+MinHeld, MinHeld))
	if extra := h.n - keep; extra > 0 {
		e.results.Release(extra)
	}
	h.n = 0
	return Hold{e: e, n: keep}
}

// release gives back what h holds, for a response that is not sent.
func (e *Engine) release(h *hold) {
	if h.n > 0 {
		e.results.Release(h.n)
		h.n = 0
	}
}

// Reservation is what one response built outside the engine (a Watch
// response, internal/watch) holds of the result budget while it is
// built: Reserve before its first record is copied into it, Cover before
// each record, Take when it is sent, Release when it is not. Get one from
// Engine.Reservation; it is not safe for concurrent use.
type Reservation struct {
	e *Engine
	h hold
}

// Reservation returns a reservation that holds nothing yet.
func (e *Engine) Reservation() Reservation { return Reservation{e: e} }

// Reserve makes r hold at least a full response's bytes
// (Options.MaxResultBytes), waiting for them as a Search response does.
func (r *Reservation) Reserve(ctx context.Context) error { return r.e.reserve(ctx, &r.h) }

// Cover makes r hold at least need bytes, the size of the response with
// the record about to be copied into it; empty says the response holds no
// record yet (then what r holds is given back before the wait). A need
// larger than the whole budget is RESOURCE_EXHAUSTED.
func (r *Reservation) Cover(ctx context.Context, need int64, empty bool) error {
	return r.e.cover(ctx, &r.h, need, empty)
}

// Take cuts r to a response holding size bytes of records and hands it
// over as the Hold that goes with the response; r then holds nothing.
func (r *Reservation) Take(size int) Hold { return r.e.take(&r.h, size) }

// Release gives back what r holds, for a response that is not sent.
func (r *Reservation) Release() { r.e.release(&r.h) }

// AnswerSlot carries the Hold of a unary answer (a Get, a Query page)
// from the method that made it to the code that writes it once the method
// has returned: the gRPC server's interceptor, which hands it to gRPC with
// the response, or the REST gateway, which releases it once the answer is
// written. A method that finds no slot in its context releases the Hold
// itself when it returns (KeepAnswer).
type AnswerSlot struct{ h Hold }

type answerSlotKey struct{}

// WithAnswerSlot returns ctx carrying a new, empty slot.
func WithAnswerSlot(ctx context.Context) (context.Context, *AnswerSlot) {
	c := &SlotContext{Context: ctx}
	return c, &c.slot
}

// SlotContext is a context carrying an AnswerSlot: what context.WithValue
// makes of it, in one allocation with the slot instead of two. A caller
// that allocates something else per call may embed it there, with Context
// set to the parent, so that one allocation carries both.
type SlotContext struct {
	context.Context
	slot AnswerSlot
}

// Slot returns c's slot.
func (c *SlotContext) Slot() *AnswerSlot { return &c.slot }

// Value implements context.Context.
func (c *SlotContext) Value(key any) any {
	if key == (answerSlotKey{}) {
		return &c.slot
	}
	return c.Context.Value(key)
}

// Take returns the Hold put in the slot, which the caller must release,
// and empties the slot.
func (s *AnswerSlot) Take() Hold {
	h := s.h
	s.h = Hold{}
	return h
}

// KeepAnswer puts h in ctx's slot, or releases it when ctx has none. A
// slot holds one answer; a second one's Hold is added to it.
func KeepAnswer(ctx context.Context, h Hold) {
	s, _ := ctx.Value(answerSlotKey{}).(*AnswerSlot)
	if s == nil {
		h.Release()
		return
	}
	if s.h.e == nil {
		s.h.e = h.e
	}
	s.h.n += h.n
}

// transcodeFree is the estimate below which TranscodeHold holds nothing:
// a small message's JSON costs no more than the rest of its request.
const transcodeFree = 64 << 10

// TranscodeHold holds n bytes of the result budget, an estimate of the
// memory a JSON transport takes to turn one message into JSON or back
// (schemajson.DecodeCost, EncodeCost), waiting for room as a response
// does. An n larger than the whole budget is RESOURCE_EXHAUSTED naming
// what (a request, a response). Release the Hold once transcoded.
func (e *Engine) TranscodeHold(ctx context.Context, n int64, what string) (Hold, error) {
	if n < transcodeFree {
		return Hold{}, nil
	}
	if n > e.opts.MaxResultBufferBytes {
		return Hold{}, apierror.Errorf(apierror.ResourceExhausted,
			"%s would take about %d MiB of memory to convert between JSON and protobuf, more than the server's result buffers of %d MiB (max result buffer bytes): use gRPC or protobuf payloads, or send or ask for fewer records at once",
			what, n>>20, e.opts.MaxResultBufferBytes>>20)
	}
	var exhausted bool
	if err := e.acquireResult(ctx, n, &exhausted); err != nil {
		return Hold{}, err
	}
	return Hold{e: e, n: n}, nil
}
