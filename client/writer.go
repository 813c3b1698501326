package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Op is a write operation.
type Op = pb.WriteOp

// The write operations.
const (
	Insert = pb.WriteOp_WRITE_OP_INSERT
	Update = pb.WriteOp_WRITE_OP_UPDATE
	Upsert = pb.WriteOp_WRITE_OP_UPSERT
	Remove = pb.WriteOp_WRITE_OP_REMOVE
	Patch  = pb.WriteOp_WRITE_OP_PATCH
)

// WriterOptions choose when a Writer sends a batch. Zero values pick the
// defaults.
type WriterOptions struct {
	// BatchRecords sends a batch when it holds this many records (default
	// 1000, or Limits.MaxBatchRecords when that is lower). More than
	// Limits.MaxBatchRecords is a *LimitError from NewWriter.
	BatchRecords int
	// BatchBytes sends a batch early once its records reach this many
	// bytes. 0 leaves batches BatchRecords long, but for the server's
	// message limit: a record that would take a batch over it starts the
	// next one.
	BatchBytes int
	// Linger sends a partial batch this long after its first record, for
	// interactive writers whose records trickle in. 0 sets no timer: a
	// partial batch waits for more records, Flush or Close, so that a bulk
	// writer sends batches of exactly BatchRecords.
	Linger time.Duration
	// Limits are the server's (see LimitsOf); zero fields are those of
	// DefaultLimits.
	Limits Limits
	// Fields and Add are a Patch writer's, sent with every batch: the field
	// paths each record sets (a named field a record lacks is cleared), and
	// the numeric fields whose values are added to the stored ones.
	Fields, Add []string
}

// ackInterval is how often a Writer asks the server to acknowledge a
// batch as it sends them, so that Durable stays close to what was sent
// while costing the server at most one wait for an fsync per interval.
const ackInterval = 100 * time.Millisecond

// Writer batches records onto one Write stream. Batches are sent without
// waiting for each other; every ackInterval one of them asks to be
// acknowledged, and Flush and Close wait for an acknowledgement of every
// batch so far. The first error from the stream ends the writer: every
// later call returns it. Safe for concurrent use.
//
// A goroutine waiting for an acknowledgement receives the stream's
// responses itself while no other goroutine does: a goroutine receiving
// every response in the background would add a hand-off to every Flush.
// Acknowledgements that nobody waits for are received in the background.
type Writer struct {
	c    *Client         // for WriteJSON's types
	ctx  context.Context // the stream's, for WriteJSON's schema fetch
	opts WriterOptions
	op   Op
	// patchBytes is what opts.Fields and Add add to every request.
	patchBytes int
	stream     grpc.BidiStreamingClient[pb.WriteStreamRequest, pb.WriteStreamResponse]
	cancel     context.CancelFunc

	mu     sync.Mutex // guards the sending side, everything down to askedAt
	batch  []*anypb.Any
	size   int    // encoded bytes of batch's records
	sent   uint64 // batches sent
	timer  *time.Timer
	err    error
	closed bool
	asked  time.Time // when a batch last asked for an acknowledgement

	// ackMu guards the receiving side, everything below. A goroutine
	// holding the receiver's role (receiving) calls Recv with ackMu
	// released; the others wait on ackCond, which is broadcast at every
	// response and at the end of the stream.
	ackMu     sync.Mutex
	ackCond   sync.Cond
	receiving bool
	waiters   int      // goroutines waiting on ackCond
	owed      uint64   // one past the last batch sent asking for an acknowledgement
	awaited   []uint64 // batches sent asking for an acknowledgement that has not come, in order
	last      ackPoint
	ended     bool                   // the stream has ended: Recv returned an error
	recvErr   error                  // the stream's final status; set when ended
	resp      pb.WriteStreamResponse // the receiver's scratch
}

// ackPoint is what the last acknowledgement said; ok is false before the
// first.
type ackPoint struct {
	ok                       bool
	batch, records, position uint64
}

// NewWriter opens a Write stream for op. ctx bounds the stream's life.
func (c *Client) NewWriter(ctx context.Context, op Op, opts WriterOptions) (*Writer, error) {
	opts.Limits = opts.Limits.withDefaults()
	opts.Limits.MaxMessageBytes = min(opts.Limits.MaxMessageBytes, dialMaxSendBytes)
	if opts.BatchRecords <= 0 {
		opts.BatchRecords = min(1000, opts.Limits.MaxBatchRecords)
	}
	if opts.BatchRecords > opts.Limits.MaxBatchRecords {
		return nil, &LimitError{Limit: "max_batch_records", Max: opts.Limits.MaxBatchRecords, Got: opts.BatchRecords}
	}
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.api.Write(ctx)
	if err != nil {
		cancel()
		return nil, asError(err)
	}
	w := &Writer{c: c, ctx: ctx, opts: opts, op: op, stream: st, cancel: cancel}
	w.ackCond.L = &w.ackMu
	for _, f := range opts.Fields {
		w.patchBytes += protowire.SizeTag(5) + protowire.SizeBytes(len(f))
	}
	for _, f := range opts.Add {
		w.patchBytes += protowire.SizeTag(6) + protowire.SizeBytes(len(f))
	}
	return w, nil
}

// receiveOne receives one response as the receiver: the caller holds
// ackMu and the receiver's role, and holds both again on return.
func (w *Writer) receiveOne() {
	w.ackMu.Unlock()
	err := w.stream.RecvMsg(&w.resp)
	w.ackMu.Lock()
	if err != nil {
		if !errors.Is(err, io.EOF) {
			w.recvErr = asError(err)
		}
		w.ended = true
	} else {
		w.last = ackPoint{ok: true, batch: w.resp.Batch, records: w.resp.Records, position: w.resp.Position}
		n := 0
		for n < len(w.awaited) && w.awaited[n] <= w.last.batch {
			n++
		}
		w.awaited = append(w.awaited[:0], w.awaited[n:]...)
	}
	w.ackCond.Broadcast()
}

// owing reports whether an acknowledgement asked for has not arrived;
// ackMu is held.
func (w *Writer) owing() bool {
	return !w.ended && len(w.awaited) > 0
}

// receiveUntil receives as the receiver, or waits for the one receiving,
// until done holds or the stream has ended; ackMu is held throughout but
// while receiving or waiting. A receiver that stops leaves the role to a
// waiter, or, when none waits and acknowledgements are owed, to a
// background goroutine, so that they are received (the server could
// otherwise be held up sending them).
func (w *Writer) receiveUntil(done func() bool) {
	for !done() && !w.ended {
		if w.receiving {
			w.waiters++
			w.ackCond.Wait()
			w.waiters--
			continue
		}
		w.receiving = true
		w.receiveOne()
		w.receiving = false
	}
	w.passRole()
}

// passRole starts a background receiver when nobody receives, nobody
// waits and acknowledgements are owed; ackMu is held. A waiter takes the
// role itself once woken.
func (w *Writer) passRole() {
	if w.receiving || w.waiters > 0 || !w.owing() {
		return
	}
	w.receiving = true
	go func() {
		w.ackMu.Lock()
		defer w.ackMu.Unlock()
		for w.owing() && w.waiters == 0 {
			w.receiveOne()
		}
		w.receiving = false
		w.ackCond.Broadcast() // a waiter that came meanwhile receives on
	}()
}

// Durable returns how many of the writer's records the server has said
// are durable: those up to the last acknowledged batch or, after a write
// error with details, those applied before the failing batch. Records sent
// after them may be durable too; if the server vanished, nobody can say.
func (w *Writer) Durable() uint64 {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	n := w.last.records
	var ce *Error
	if errors.As(w.recvErr, &ce) && ce.Write != nil {
		n = max(n, ce.Write.GetRecordsApplied())
	}
	return n
}

// Write adds a message as a record (packed into an Any).
func (w *Writer) Write(m proto.Message) error {
	a, err := anypb.New(m)
	if err != nil {
		return fmt.Errorf("pack record: %w", err)
	}
	return w.WriteAny(a)
}

// WriteAny adds a record already packed as an Any. A record too large for
// any request (see Limits) is refused with a *LimitError; the writer goes
// on without it.
func (w *Writer) WriteAny(a *anypb.Any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("writer is closed")
	}
	n := recordBytes(a)
	limit := w.opts.Limits.MaxMessageBytes
	overhead := requestOverhead + w.patchBytes
	if overhead+n > limit {
		return &LimitError{Limit: "max_message_bytes", Max: limit, Got: overhead + n}
	}
	if len(w.batch) > 0 && overhead+w.size+n > limit {
		if err := w.sendLocked(false, false); err != nil {
			return err
		}
	}
	w.batch = append(w.batch, a)
	w.size += n
	if len(w.batch) >= w.opts.BatchRecords || (w.opts.BatchBytes > 0 && w.size >= w.opts.BatchBytes) {
		return w.sendLocked(false, false)
	}
	if len(w.batch) == 1 && w.opts.Linger > 0 {
		if w.timer == nil {
			w.timer = time.AfterFunc(w.opts.Linger, w.lingerFlush)
		} else {
			w.timer.Reset(w.opts.Linger)
		}
	}
	return nil
}

func (w *Writer) lingerFlush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil && !w.closed && len(w.batch) > 0 {
		_ = w.sendLocked(false, false)
	}
}

// sendLocked sends the pending records as one batch, asking for an
// acknowledgement when ack is set or none was asked for a while. flushing
// says that the caller waits for the acknowledgement; otherwise one asked
// for is received in the background.
func (w *Writer) sendLocked(ack, flushing bool) error {
	if w.timer != nil {
		w.timer.Stop()
	}
	if now := time.Now(); ack || now.Sub(w.asked) >= ackInterval {
		ack = true
		w.asked = now
	}
	req := &pb.WriteStreamRequest{Op: w.op, Records: w.batch, Ack: ack, Fields: w.opts.Fields, Add: w.opts.Add}
	w.batch = nil
	w.size = 0
	if ack {
		w.ackMu.Lock()
		w.owed = w.sent + 1
		w.awaited = append(w.awaited, w.sent)
		w.ackMu.Unlock()
	}
	if err := w.stream.Send(req); err != nil {
		// The server ended the stream; its status says why.
		w.err = w.status()
		if w.err == nil {
			w.err = asError(err)
		}
		return w.err
	}
	w.sent++
	if ack && !flushing {
		// Nobody may wait for this acknowledgement.
		w.ackMu.Lock()
		w.passRole()
		w.ackMu.Unlock()
	}
	return nil
}

// status is the stream's final status: it receives (or waits for the
// receiver) until the stream ends.
func (w *Writer) status() error {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	w.receiveUntil(func() bool { return false })
	return w.recvErr
}

// Flush sends the pending records and waits until the server has made
// every batch sent so far durable. It returns the first error, with its
// details (see *Error). The writer is not locked while Flush waits: other
// goroutines sharing it go on writing and flushing, and the server makes
// the batches that arrive meanwhile durable together (one fsync can
// acknowledge the records of every goroutine that flushed).
//
// While flushDepth batches wait for their acknowledgements, a Flush does
// not send: its records stay pending, and so do those of every goroutine
// that flushes meanwhile, until an acknowledgement frees a place and the
// first of them to see it sends them all as one batch. Goroutines sharing
// a writer so share requests and fsyncs, as writers of their own share
// the server's group commit.
func (w *Writer) Flush() error {
	w.mu.Lock()
	if w.err != nil {
		defer w.mu.Unlock()
		return w.err
	}
	want := w.sent // the batch that will carry the records pending now
	if !w.placeFree() {
		w.mu.Unlock()
		w.awaitPlace(want)
		w.mu.Lock()
	}
	var err error
	if !w.askedFor(want) {
		_, err = w.sendFlushLocked()
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if w.awaitAck(want) {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.endedLocked()
}

// flushDepth is how many batches asking for an acknowledgement a Flush
// leaves in flight before it waits rather than send: two keep the server
// busy (it reads a stream's next request while the last waits for its
// fsync) without splitting the records that gather meanwhile.
const flushDepth = 2

// placeFree reports whether fewer than flushDepth acknowledgements are
// awaited.
func (w *Writer) placeFree() bool {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	return len(w.awaited) < flushDepth
}

// askedFor reports whether a batch at or after want was sent asking for
// an acknowledgement, which then acknowledges want too.
func (w *Writer) askedFor(want uint64) bool {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	return w.owed > want
}

// awaitPlace receives, or waits for the receiver, until a place is free,
// a batch at or after want asked for its acknowledgement, or the stream
// has ended.
func (w *Writer) awaitPlace(want uint64) {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	w.receiveUntil(func() bool { return len(w.awaited) < flushDepth || w.owed > want })
}

// flushLocked is Flush for a caller that holds mu throughout (Close).
func (w *Writer) flushLocked() error {
	want, err := w.sendFlushLocked()
	if err != nil {
		return err
	}
	if w.awaitAck(want) {
		return nil
	}
	return w.endedLocked()
}

// sendFlushLocked sends the pending records asking for an
// acknowledgement and returns the number of the batch to wait for.
func (w *Writer) sendFlushLocked() (uint64, error) {
	if w.err != nil {
		return 0, w.err
	}
	if err := w.sendLocked(true, true); err != nil {
		return 0, err
	}
	return w.sent - 1, nil
}

// awaitAck waits until the server has acknowledged batch want (every
// batch up to it is durable) and reports true, or the stream has ended
// without that acknowledgement and reports false.
func (w *Writer) awaitAck(want uint64) bool {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	acked := func() bool { return w.last.ok && w.last.batch >= want }
	w.receiveUntil(acked)
	return acked()
}

// endedLocked records and returns why the stream ended before an
// acknowledgement: the first error the writer saw, else the stream's
// status.
func (w *Writer) endedLocked() error {
	if w.err == nil {
		w.err = w.status()
	}
	if w.err == nil {
		w.err = errors.New("stream ended before the acknowledgement")
	}
	return w.err
}

// Close flushes, ends the stream and returns the first error. The last
// acknowledgement (counts and durable position) is returned on success.
func (w *Writer) Close() (*pb.WriteStreamResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.cancel()
	if w.closed {
		return w.lastAck(), w.err
	}
	w.closed = true
	if err := w.flushLocked(); err != nil {
		return nil, err
	}
	if err := w.stream.CloseSend(); err != nil {
		w.err = asError(err)
		return nil, w.err
	}
	if err := w.status(); err != nil {
		w.err = err
		return nil, err
	}
	return w.lastAck(), nil
}

func (w *Writer) lastAck() *pb.WriteStreamResponse {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	if !w.last.ok {
		return nil
	}
	return &pb.WriteStreamResponse{Batch: w.last.batch, Records: w.last.records, Position: w.last.position}
}
