package grpc

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
)

// Write implements pbgrpc.ProtobaseServer: batches with per-batch operations and
// optional acknowledgements, each sent once its batch is durable.
//
// An acknowledgement never holds up the stream: waiting for its fsync
// before receiving the next batch would serialise applying and syncing.
// The handler reads one request ahead (writeReader) and keeps the
// requested acknowledgements in order; each goes out as soon as its batch
// is known durable (the writer waits for old batches while it applies new
// ones), or, when no next request is waiting, after a Sync: the client
// may be holding its next batch until it hears back, and the batches'
// bytes of the write budget come back.
func (s *Service) Write(st grpc.BidiStreamingServer[pb.WriteStreamRequest, pb.WriteStreamResponse]) error {
	ctx := st.Context()
	id, err := s.require(ctx, auth.RoleWrite)
	if err != nil {
		return err
	}
	w := s.e.NewWriter()
	defer w.Close()
	acks := &ackQueue{st: st}
	in := newWriteReader(s.e, id)
	// A request received whole is applied even if the stream is
	// cancelled meanwhile (see writeStream).
	actx := context.WithoutCancel(ctx)
	// apply applies a request and queues its acknowledgement. The handler
	// calls it, or the reader while the handler waits (writeReader.next).
	in.apply = func(m received) error {
		w.Use(m.res)
		if err := s.applyStreamBatch(actx, w, id, m.req, m.ahead); err != nil {
			return err
		}
		if m.req.Ack {
			acks.add(w)
		}
		in.done(m)
		return nil
	}
	go in.run(st)
	defer in.stop()
	for {
		m, ok := in.poll()
		if !ok {
			// Nothing is waiting: acknowledge what was asked and make
			// the stream's batches durable, which gives back what they
			// hold of the write budget (the reader may be waiting for
			// it), then block.
			if err := acks.flush(w, true); err != nil {
				return err
			}
			if _, err := w.Sync(); err != nil {
				return toStatus(err)
			}
			m = in.next()
		}
		if end, err := s.step(w, in, acks, m); end {
			return err
		}
	}
}

// step handles one message from the reader: a request to apply, one the
// reader applied, or the error that ends the stream. end says that the
// stream ends, with err (nil when the client closed it and all went well).
func (s *Service) step(w *engine.Writer, in *writeReader, acks *ackQueue, m received) (end bool, err error) {
	if m.err != nil && !m.applied {
		if errors.Is(m.err, io.EOF) {
			if err := acks.flush(w, true); err != nil {
				return true, err
			}
			_, err := w.Sync()
			return true, toStatus(err)
		}
		if ferr := acks.flush(w, true); ferr != nil {
			return true, ferr
		}
		return true, abortReceive(w, m.err)
	}
	err = m.err
	if !m.applied {
		err = in.apply(m)
	}
	if err != nil {
		// Everything applied before is durable now (Abort and the
		// failed Apply sync): its acknowledgements still go out.
		if ferr := acks.flush(w, true); ferr != nil {
			return true, ferr
		}
		return true, toStatus(err)
	}
	if err := acks.flush(w, false); err != nil {
		return true, err
	}
	return false, nil
}

// applyStreamBatch applies one request of a Write stream, with its phase 1
// done ahead when the reader did it. A refused batch comes back as the
// error to end the stream with, after the batches before it were made
// durable.
func (s *Service) applyStreamBatch(ctx context.Context, w *engine.Writer, id *auth.Identity, req *pb.WriteStreamRequest, ahead *engine.Ahead) error {
	b, ok := streamBatch(req)
	// With ops each record names its own; a batch of conditions alone is
	// a check and needs none.
	if !ok && len(req.Ops) == 0 && len(req.Records) > 0 {
		// Abort makes the earlier batches durable and names this one,
		// with their counts, like any other failed batch.
		return w.Abort(apierror.Errorf(apierror.InvalidArgument, "op %v is not a write operation", req.Op))
	}
	b.Ahead = ahead
	return applyChecked(ctx, w, id, b)
}

// streamBatch is the engine batch of a Write stream's request; ok is false
// when its op is not a write operation.
func streamBatch(req *pb.WriteStreamRequest) (b engine.Batch, ok bool) {
	op, ok := engine.OpFromProto(req.Op)
	return engine.Batch{Op: op, Records: req.Records, Conditions: req.Conditions, Fields: req.Fields, Add: req.Add, Ops: req.Ops}, ok
}

// writeReader receives a Write stream's requests on its own goroutine, one
// request ahead of the handler, so that the handler can tell whether the
// client has sent more (poll) before it decides to wait for an fsync. It
// holds two requests: the one the handler applies and the one it reads;
// the handler hands each back (done) once applied, which bounds the
// read-ahead to one decoded message per stream. Each decoded request
// takes its bytes of the engine's write budget before it is passed on
// (engine.ReserveRequest), so that a request read ahead is counted too.
// A request passed on to a busy handler has its phase 1 done here first
// (engine.Ahead), overlapping the commit of the batch before.
//
// A request that arrives while the handler waits in next, with nothing
// else to do, is applied by the reader itself (apply) before the handler
// wakes: a client that waits for each acknowledgement before it sends
// its next batch then pays no hand-off between goroutines before its
// batch reaches the store, and the handler's wake-up overlaps the fsync
// it waits for next. Only one of them applies at a time: the reader
// applies only while the handler waits, and the handler goes on once the
// reader has passed it what it applied.
type writeReader struct {
	e    *engine.Engine
	id   *auth.Identity
	out  chan received  // unbuffered: a send waits for the handler
	free chan writeSlot // requests the reader may decode into
	quit chan struct{}  // closed when the handler returns
	// apply applies a request and hands it back (done); set before run.
	apply func(received) error

	mu sync.Mutex
	// idle is set while the handler waits in next having nothing
	// applied left to make durable; the reader clears it when it takes
	// the applier's part or passes a request on.
	idle bool
}

// writeSlot is a request buffer and the Ahead that prepares its batch.
type writeSlot struct {
	req   *pb.WriteStreamRequest
	ahead *engine.Ahead
}

// received is a request, its reservation of the write budget (for
// Writer.Use), or the error that ends the stream. applied says that the
// reader applied the request; err is then what apply returned.
type received struct {
	writeSlot
	res     engine.Reserved
	err     error
	applied bool
}

func newWriteReader(e *engine.Engine, id *auth.Identity) *writeReader {
	r := &writeReader{
		e: e, id: id,
		out:  make(chan received),
		free: make(chan writeSlot, 2),
		quit: make(chan struct{}),
	}
	for range 2 {
		r.free <- writeSlot{req: new(pb.WriteStreamRequest), ahead: e.NewAhead()}
	}
	return r
}

// run receives until the first error (io.EOF included), which it passes
// on as the last message. After the handler returns, gRPC ends the stream
// and a RecvMsg in progress returns.
func (r *writeReader) run(st grpc.ServerStream) {
	for {
		var sl writeSlot
		select {
		case sl = <-r.free:
		case <-r.quit:
			return
		}
		m := received{writeSlot: sl, err: recvMsg(st, sl.req)}
		if m.err == nil {
			m.res, m.err = r.e.ReserveRequest(st.Context(), engine.RecordBytes(sl.req.Records))
		}
		r.mu.Lock()
		self := r.idle && m.err == nil
		r.idle = false
		r.mu.Unlock()
		switch {
		case self:
			m.err, m.applied = r.apply(m), true
		case m.err == nil:
			if b, ok := streamBatch(sl.req); ok {
				b.Ahead = sl.ahead
				prepareAhead(r.id, b)
			}
		}
		select {
		case r.out <- m:
		case <-r.quit:
			if !m.applied {
				m.res.Release()
				sl.ahead.Forget()
			}
			return
		}
		if m.err != nil {
			return
		}
		// The handler may have taken m in next, idle still set: it
		// applies m now, so the next request must not be applied here.
		r.mu.Lock()
		r.idle = false
		r.mu.Unlock()
	}
}

// poll returns the next request or receive error if it is already
// waiting; ok is false when none is.
func (r *writeReader) poll() (m received, ok bool) {
	select {
	case m = <-r.out:
		return m, true
	default:
		return received{}, false
	}
}

// next waits for the next request or receive error; the handler calls it
// with nothing applied left to make durable, and does not touch the
// stream's writer until it returns.
func (r *writeReader) next() received {
	r.mu.Lock()
	r.idle = true
	r.mu.Unlock()
	m := <-r.out
	r.mu.Lock()
	r.idle = false
	r.mu.Unlock()
	return m
}

// done hands back a request the handler has applied, emptied: the engine
// keeps no reference to it, and an idle stream must not keep its records
// alive outside the write budget.
func (r *writeReader) done(m received) {
	m.req.Reset()
	m.ahead.Forget()
	r.free <- m.writeSlot
}

func (r *writeReader) stop() { close(r.quit) }

// ackQueue holds the acknowledgements a Write stream owes, oldest first.
type ackQueue struct {
	st   grpc.BidiStreamingServer[pb.WriteStreamRequest, pb.WriteStreamResponse]
	q    []ackPoint
	resp pb.WriteStreamResponse
}

// ackPoint is what one acknowledgement reports: the batch, the records
// applied up to it and its position (its commit sequence).
type ackPoint struct{ batch, records, pos uint64 }

// add queues the acknowledgement of the batch w applied last.
func (a *ackQueue) add(w *engine.Writer) {
	a.q = append(a.q, ackPoint{batch: w.Batches() - 1, records: w.Records(), pos: w.Position()})
}

// flush sends every queued acknowledgement whose batch is known durable;
// with wait it first syncs the stream, so that all of them go.
func (a *ackQueue) flush(w *engine.Writer, wait bool) error {
	if len(a.q) == 0 {
		return nil
	}
	if wait && a.q[len(a.q)-1].pos > w.Durable() {
		if _, err := w.Sync(); err != nil {
			return toStatus(err)
		}
	}
	n := 0
	for _, p := range a.q {
		if p.pos > w.Durable() {
			break
		}
		a.resp.Batch, a.resp.Records, a.resp.Position = p.batch, p.records, p.pos
		if err := a.st.Send(&a.resp); err != nil {
			return err
		}
		n++
	}
	a.q = append(a.q[:0], a.q[n:]...)
	return nil
}
