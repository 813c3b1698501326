package grpc

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
)

// writeStream applies each received batch in order. OK is sent only after
// every batch is durable; on a failed batch, the batches before it are made
// durable first, so the counts in the error are true.
//
// The batches are received on a goroutine of their own (batchReader), one
// ahead of the one applied, and that goroutine also runs the next batch's
// phase 1 (engine.Ahead): checking its records and reading their keys
// overlaps the commit of the batch before, which a bulk load into an
// indexed type spends half its time on.
//
// A batch received whole is applied even if the stream is cancelled
// meanwhile: gRPC cancels it when it refuses a later message (one over
// the size limit, say), which the reader may meet while the batch before
// is still being applied, and that batch must not depend on how far
// ahead the reader was.
func (s *Service) writeStream(st grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse], op engine.Op) error {
	ctx := st.Context()
	id, err := s.require(ctx, auth.RoleWrite)
	if err != nil {
		return err
	}
	w := s.e.NewWriter()
	defer w.Close()
	actx := context.WithoutCancel(ctx)
	in := newBatchReader(s.e, id, op)
	go in.run(st)
	defer in.stop()
	for {
		var m readBatch
		select {
		case m = <-in.out:
		case <-in.starved:
			// The reader waits for room in the write budget: this
			// stream's unsynced batches give theirs back once durable.
			if _, err := w.Sync(); err != nil {
				return toStatus(err)
			}
			continue
		}
		if m.err != nil {
			if errors.Is(m.err, io.EOF) {
				pos, err := w.Sync()
				if err != nil {
					return toStatus(err)
				}
				return st.SendAndClose(&pb.WriteResponse{Batches: w.Batches(), Records: w.Records(), Position: pos})
			}
			// The next batch never arrived whole (too large, cancelled,
			// undecodable): report it as that batch's error with the
			// durable counts of the ones before it.
			return abortReceive(w, m.err)
		}
		if err := in.apply(actx, w, m); err != nil {
			return toStatus(err)
		}
	}
}

// batchReader receives the requests of a write stream on its own
// goroutine, one request ahead of the handler: it holds two, the one the
// handler applies and the one it reads, with an engine.Ahead each. A
// decoded request takes its bytes of the engine's write budget before it
// is passed on, so that a request read ahead is counted too; when they do
// not fit at once, the reader says so (starved) before it waits, since the
// handler may hold them in batches it has not waited to be durable.
type batchReader struct {
	e    *engine.Engine
	id   *auth.Identity
	op   engine.Op
	out  chan readBatch // unbuffered: a send waits for the handler
	free chan readBatch // request buffers the reader may decode into
	// starved has a value when the reader waits for room in the budget.
	starved chan struct{}
	quit    chan struct{} // closed when the handler returns
}

// readBatch is a request with its phase 1 done ahead and its reservation
// of the write budget, or the error that ends the stream.
type readBatch struct {
	req   *pb.WriteRequest
	ahead *engine.Ahead
	res   engine.Reserved
	err   error
}

func newBatchReader(e *engine.Engine, id *auth.Identity, op engine.Op) *batchReader {
	r := &batchReader{
		e: e, id: id, op: op,
		out:     make(chan readBatch),
		free:    make(chan readBatch, 2),
		starved: make(chan struct{}, 1),
		quit:    make(chan struct{}),
	}
	for range 2 {
		r.free <- readBatch{req: new(pb.WriteRequest), ahead: e.NewAhead()}
	}
	return r
}

// batch is the engine batch of req, with its Ahead.
func (r *batchReader) batch(m readBatch) engine.Batch {
	return engine.Batch{Op: r.op, Records: m.req.Records, Conditions: m.req.Conditions, Ahead: m.ahead}
}

// run receives until the first error (io.EOF included), which it passes
// on as the last message. After the handler returns, gRPC ends the stream
// and a RecvMsg in progress returns.
func (r *batchReader) run(st grpc.ServerStream) {
	for {
		var m readBatch
		select {
		case m = <-r.free:
		case <-r.quit:
			return
		}
		m.err = recvMsg(st, m.req)
		if m.err == nil {
			m.res, m.err = r.reserve(st.Context(), engine.RecordBytes(m.req.Records))
		}
		if m.err == nil {
			prepareAhead(r.id, r.batch(m))
		}
		select {
		case r.out <- m:
		case <-r.quit:
			m.res.Release()
			m.ahead.Forget()
			return
		}
		if m.err != nil {
			return
		}
	}
}

// reserve takes n bytes of the write budget for a decoded request.
func (r *batchReader) reserve(ctx context.Context, n int64) (engine.Reserved, error) {
	if res, ok := r.e.TryReserveRequest(n); ok {
		return res, nil
	}
	select {
	case r.starved <- struct{}{}:
	default:
	}
	return r.e.ReserveRequest(ctx, n)
}

// apply applies a request on w and hands its buffer back to the reader.
func (r *batchReader) apply(ctx context.Context, w *engine.Writer, m readBatch) error {
	w.Use(m.res)
	defer r.done(m)
	return applyChecked(ctx, w, r.id, r.batch(m))
}

// applyChecked applies b on w once id may write it. A refused batch comes
// back as the error to end the stream with, after the batches before it
// were made durable.
func applyChecked(ctx context.Context, w *engine.Writer, id *auth.Identity, b engine.Batch) error {
	if err := id.CheckWrite(b.Records, b.Conditions); err != nil {
		return w.Abort(err)
	}
	if err := w.Apply(ctx, b); err != nil {
		if _, serr := w.Sync(); serr != nil {
			return serr
		}
		return err
	}
	return nil
}

// prepareAhead runs phase 1 of b in its Ahead when id may write it: a
// batch the scope refuses is refused before Apply, whole.
func prepareAhead(id *auth.Identity, b engine.Batch) {
	if id.CheckWrite(b.Records, b.Conditions) == nil {
		b.Ahead.Prepare(b)
	}
}

// done hands back a request the handler has applied, emptied: the engine
// keeps no reference to it, and an idle stream must not keep its records
// alive outside the write budget.
func (r *batchReader) done(m readBatch) {
	m.req.Reset()
	m.ahead.Forget()
	r.free <- readBatch{req: m.req, ahead: m.ahead}
}

func (r *batchReader) stop() { close(r.quit) }
