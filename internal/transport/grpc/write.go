package grpc

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
)

// Write implements pb.ProtobaseServer: batches with per-batch operations and
// optional acknowledgements, each sent once its batch is durable.
//
// An acknowledgement never holds up the stream: waiting for its fsync
// before receiving the next batch would serialise applying and syncing,
// as it did for the lab's ingest until issue 13 (docs/performance.md). The
// handler reads one request ahead (writeReader) and keeps the requested
// acknowledgements in order; each goes out as soon as its batch is known
// durable (the writer waits for old batches while it applies new ones), or,
// when no next request is waiting, after a Sync: the client may be holding
// its next batch until it hears back.
func (s *Service) Write(st grpc.BidiStreamingServer[pb.WriteStreamRequest, pb.WriteStreamResponse]) error {
	ctx := st.Context()
	id, err := s.require(ctx, auth.RoleWrite)
	if err != nil {
		return err
	}
	w := s.e.NewWriter()
	defer w.Close()
	in := newWriteReader(st)
	defer in.stop()
	acks := &ackQueue{st: st}
	for {
		req, err := in.poll()
		if req == nil && err == nil {
			// Nothing is waiting: acknowledge what was asked, then block.
			if err := acks.flush(w, true); err != nil {
				return err
			}
			req, err = in.next()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if err := acks.flush(w, true); err != nil {
					return err
				}
				_, err := w.Sync()
				return toStatus(err)
			}
			if ferr := acks.flush(w, true); ferr != nil {
				return ferr
			}
			return toStatus(w.Abort(err))
		}
		if err := s.applyStreamBatch(ctx, w, id, req); err != nil {
			// Everything applied before is durable now (Abort and the
			// failed Apply sync): its acknowledgements still go out.
			if ferr := acks.flush(w, true); ferr != nil {
				return ferr
			}
			return toStatus(err)
		}
		if req.Ack {
			acks.add(w)
		}
		in.done(req)
		if err := acks.flush(w, false); err != nil {
			return err
		}
	}
}

// applyStreamBatch applies one request of a Write stream. A refused batch
// comes back as the error to end the stream with, after the batches before
// it were made durable.
func (s *Service) applyStreamBatch(ctx context.Context, w *engine.Writer, id *auth.Identity, req *pb.WriteStreamRequest) error {
	op, ok := engine.OpFromProto(req.Op)
	if !ok {
		// Abort makes the earlier batches durable and names this one,
		// with their counts, like any other failed batch.
		return w.Abort(apierror.Errorf(codes.InvalidArgument, "op %v is not a write operation", req.Op))
	}
	if err := id.CheckRecords(req.Records); err != nil {
		return w.Abort(err)
	}
	if err := w.Apply(ctx, op, req.Records); err != nil {
		if _, serr := w.Sync(); serr != nil {
			return serr
		}
		return err
	}
	return nil
}

// writeReader receives a Write stream's requests on its own goroutine, one
// request ahead of the handler, so that the handler can tell whether the
// client has sent more (poll) before it decides to wait for an fsync. It
// holds two requests: the one the handler applies and the one it reads;
// the handler hands each back (done) once applied, which bounds the
// read-ahead to one decoded message per stream.
type writeReader struct {
	out  chan received               // unbuffered: a send waits for the handler
	free chan *pb.WriteStreamRequest // requests the reader may decode into
	quit chan struct{}               // closed when the handler returns
}

type received struct {
	req *pb.WriteStreamRequest
	err error
}

func newWriteReader(st grpc.ServerStream) *writeReader {
	r := &writeReader{
		out:  make(chan received),
		free: make(chan *pb.WriteStreamRequest, 2),
		quit: make(chan struct{}),
	}
	r.free <- new(pb.WriteStreamRequest)
	r.free <- new(pb.WriteStreamRequest)
	go r.run(st)
	return r
}

// run receives until the first error (io.EOF included), which it passes
// on as the last message. After the handler returns, gRPC ends the stream
// and a RecvMsg in progress returns.
func (r *writeReader) run(st grpc.ServerStream) {
	for {
		var req *pb.WriteStreamRequest
		select {
		case req = <-r.free:
		case <-r.quit:
			return
		}
		req.Reset()
		err := recvMsg(st, req)
		select {
		case r.out <- received{req, err}:
		case <-r.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// poll returns the next request or receive error if it is already
// waiting, else nil and nil.
func (r *writeReader) poll() (*pb.WriteStreamRequest, error) {
	select {
	case m := <-r.out:
		return m.req, m.err
	default:
		return nil, nil
	}
}

// next waits for the next request or receive error.
func (r *writeReader) next() (*pb.WriteStreamRequest, error) {
	m := <-r.out
	return m.req, m.err
}

// done hands back a request the handler has applied: the engine keeps no
// reference to it.
func (r *writeReader) done(req *pb.WriteStreamRequest) { r.free <- req }

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
