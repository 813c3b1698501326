package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
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
)

// WriterOptions tune batching. Zero values pick the defaults.
type WriterOptions struct {
	// MaxRecords sends a batch when it holds this many records (default 1000).
	MaxRecords int
	// MaxBytes sends a batch when its records reach this size (default 1 MiB).
	MaxBytes int
	// Linger sends a partial batch this long after its first record
	// (default 10 ms; negative disables the timer).
	Linger time.Duration
}

// Writer batches records onto one Write stream. Batches are sent without
// waiting; Flush asks the server to acknowledge, which it does once every
// batch so far is durable. The first error ends the writer: every later
// call returns it. Safe for concurrent use.
type Writer struct {
	opts   WriterOptions
	op     Op
	stream grpc.BidiStreamingClient[pb.WriteStreamRequest, pb.WriteStreamResponse]
	cancel context.CancelFunc

	mu      sync.Mutex // guards everything below
	batch   []*anypb.Any
	bytes   int
	sent    uint64 // batches sent
	timer   *time.Timer
	err     error
	closed  bool
	acks    chan *pb.WriteStreamResponse
	recvErr chan error
	last    *pb.WriteStreamResponse
}

// NewWriter opens a Write stream for op. ctx bounds the stream's life.
func (c *Client) NewWriter(ctx context.Context, op Op, opts WriterOptions) (*Writer, error) {
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = 1000
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 20
	}
	if opts.Linger == 0 {
		opts.Linger = 10 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.api.Write(ctx)
	if err != nil {
		cancel()
		return nil, asError(err)
	}
	w := &Writer{opts: opts, op: op, stream: st, cancel: cancel,
		acks: make(chan *pb.WriteStreamResponse, 16), recvErr: make(chan error, 1)}
	go w.receive()
	return w, nil
}

func (w *Writer) receive() {
	for {
		resp, err := w.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			w.recvErr <- asError(err)
			close(w.acks)
			return
		}
		w.acks <- resp
	}
}

// Write adds a message as a record (packed into an Any).
func (w *Writer) Write(m proto.Message) error {
	a, err := anypb.New(m)
	if err != nil {
		return fmt.Errorf("pack record: %w", err)
	}
	return w.WriteAny(a)
}

// WriteAny adds a record already packed as an Any.
func (w *Writer) WriteAny(a *anypb.Any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("writer is closed")
	}
	w.batch = append(w.batch, a)
	w.bytes += len(a.Value) + len(a.TypeUrl)
	if len(w.batch) >= w.opts.MaxRecords || w.bytes >= w.opts.MaxBytes {
		return w.sendLocked(false)
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
		_ = w.sendLocked(false)
	}
}

func (w *Writer) sendLocked(ack bool) error {
	if w.timer != nil {
		w.timer.Stop()
	}
	req := &pb.WriteStreamRequest{Op: w.op, Records: w.batch, Ack: ack}
	w.batch = nil
	w.bytes = 0
	if err := w.stream.Send(req); err != nil {
		// The server ended the stream; its status says why.
		w.err = w.waitStatus()
		if w.err == nil {
			w.err = asError(err)
		}
		return w.err
	}
	w.sent++
	return nil
}

// waitStatus drains acknowledgements until the stream's final status.
func (w *Writer) waitStatus() error {
	for range w.acks {
	}
	return <-w.recvErr
}

// Flush sends the pending records and waits until the server has made
// every batch sent so far durable. It returns the first error, with its
// details (see *Error).
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	if w.err != nil {
		return w.err
	}
	if err := w.sendLocked(true); err != nil {
		return err
	}
	want := w.sent - 1
	for {
		resp, ok := <-w.acks
		if !ok {
			w.err = <-w.recvErr
			if w.err == nil {
				w.err = errors.New("stream ended before the acknowledgement")
			}
			return w.err
		}
		w.last = resp
		if resp.Batch >= want {
			return nil
		}
	}
}

// Close flushes, ends the stream and returns the first error. The last
// acknowledgement (counts and durable position) is returned on success.
func (w *Writer) Close() (*pb.WriteStreamResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.cancel()
	if w.closed {
		return w.last, w.err
	}
	w.closed = true
	if err := w.flushLocked(); err != nil {
		return nil, err
	}
	if err := w.stream.CloseSend(); err != nil {
		w.err = asError(err)
		return nil, w.err
	}
	if err := w.waitStatus(); err != nil {
		w.err = err
		return nil, err
	}
	return w.last, nil
}
