package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// WatchOptions say what a Watch streams. Types is required; the zero
// value of every other field takes the server's default.
type WatchOptions struct {
	// Types are the full names of the record types watched (at least one).
	Types []string
	// Where is a filter as an expression tree (see Eq, And, ...); Filter
	// the same as text ("age >= 30"). At most one of them. A change is
	// sent when the record after it (for a remove, before it) matches.
	Where  *pb.Expr
	Filter string
	// Start is where the watch begins: StartNow (the default when nil),
	// StartOldest, StartAfter a change's or progress mark's position, or
	// StartAfterCommit a write acknowledgement's position.
	Start *pb.WatchStart
	// OldRecords also sends each update's and remove's record as it was
	// before the change (Change.OldRecord).
	OldRecords bool
	// BatchSize caps the changes per response message (0: the server's
	// default).
	BatchSize uint32
	// NoResume ends the watch at the first error. Without it a stream
	// that fails with UNAVAILABLE (the connection dropped, the server
	// restarted or is stopping) is started again after the last position
	// delivered, so that every change still comes once, in order; see
	// Watcher.
	NoResume bool
	// ResumeFor bounds how long a watch keeps trying to resume after its
	// stream failed, counted from the failure: past it, Next returns false
	// and Err is the last failure. 0 means no bound: it tries until the
	// context ends or Close is called.
	ResumeFor time.Duration
	// ProgressBatches makes NextBatch also return, as an empty batch, a
	// message that only moves the position on (a progress mark while
	// nothing matches): a consumer that checkpoints Position sees it.
	ProgressBatches bool
}

// StartNow starts a watch with the changes committed after it begins.
func StartNow() *pb.WatchStart {
	return &pb.WatchStart{Start: &pb.WatchStart_Now{Now: true}}
}

// StartOldest starts a watch at the oldest change the server keeps.
func StartOldest() *pb.WatchStart {
	return &pb.WatchStart{Start: &pb.WatchStart_Oldest{Oldest: true}}
}

// StartAfter starts a watch after pos: the position of the last change (or
// progress mark) a watcher saw (Watcher.Position), so that the new watch
// sends every later change once.
func StartAfter(pos *pb.Position) *pb.WatchStart {
	return &pb.WatchStart{Start: &pb.WatchStart_After{After: proto.CloneOf(pos)}}
}

// StartAfterCommit starts a watch after every change of commit: the
// position a durable write acknowledgement carries (WriteStreamResponse,
// WriteResponse).
func StartAfterCommit(commit uint64) *pb.WatchStart {
	return &pb.WatchStart{Start: &pb.WatchStart_After{After: &pb.Position{Commit: commit}}}
}

// Watcher iterates over the changes a Watch streams, in commit order:
//
//	w, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}})
//	if err != nil { ... }
//	for w.Next() { use(w.Change()) }
//	if err := w.Err(); err != nil { ... } // e.g. OUT_OF_RANGE: the position was trimmed
//
// A watch has no end of its own: Next returns false when the server ends
// it with an error that resuming cannot mend, the context is done, or
// Close is called.
//
// A watch resumes by itself: when its stream fails with UNAVAILABLE (the
// connection was lost, the server was killed, restarted or is stopping),
// it waits and starts a new stream after the last position delivered
// (Position), so Next goes on with the next change, with no gap and no
// duplicate. The waits start at 100 ms and double up to 5 s between
// tries; WatchOptions.ResumeFor bounds how long it tries, and NoResume
// turns resuming off. Any other status ends the watch at once: an
// OUT_OF_RANGE (the position is no longer kept: changes would be lost),
// PERMISSION_DENIED, UNAUTHENTICATED, INVALID_ARGUMENT, NOT_FOUND (a type
// dropped) are for the caller to act on, never skipped. Next, Change
// and Err (and NextBatch, Batch) belong to one goroutine; Position and
// Close may be called from any goroutine.
//
// A consumer of many changes takes them a message at a time with
// NextBatch and Batch: the watcher then decodes each message into the
// storage of the one before, so that receiving allocates almost nothing.
type Watcher struct {
	stream grpc.ServerStreamingClient[pb.WatchResponse]
	cancel context.CancelFunc // ends the watch: every stream of it
	closed atomic.Bool        // Close was called: the end is not an error

	// What a new stream needs to resume: the watch's context (ended by
	// cancel), the request (its start replaced by the resume point), and
	// the current stream's own cancel.
	c            *Client
	ctx          context.Context
	req          *pb.WatchRequest
	streamCancel context.CancelFunc
	noResume     bool
	resumeFor    time.Duration
	progress     bool // NextBatch returns progress-only messages
	resumes      atomic.Int64
	// failedAt is when the stream failed, zero while messages come;
	// wait is the next wait before trying to resume.
	failedAt time.Time
	wait     time.Duration

	// recv is what each message is decoded into. lent says a change of
	// its slabs went out by Next (the caller may keep it): the next
	// message gets new slabs. Changes that went out by NextBatch are
	// the caller's until the next call only, so their slabs are reused.
	recv  watchRecv
	lent  bool
	cur   []*pb.Change
	ch    *pb.Change
	batch []*pb.Change
	// pos is the resume point once cur is read: the last change's
	// position of the latest message, or its progress mark when later.
	// A copy: the message's own positions may be decoded over.
	pos *pb.Position
	err error
	// resume is what Position returns, kept by Next for readers in other
	// goroutines: ch's position while cur holds more, else pos.
	resume atomic.Pointer[pb.Position]
}

// Watch starts streaming the committed changes to records of opts.Types.
// It returns once the server has begun the watch, with its first message
// (which names the start: Position): a refusal (an unknown type, a bad
// filter, a start older than the changes the server keeps: OUT_OF_RANGE)
// is Watch's error, and with StartNow every change committed after Watch
// returned is sent.
func (c *Client) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	if len(opts.Types) == 0 {
		return nil, errors.New("watch: WatchOptions.Types names no record type")
	}
	if opts.Where != nil && opts.Filter != "" {
		return nil, errors.New("watch: WatchOptions has both Where and Filter; give one")
	}
	req := &pb.WatchRequest{
		Types:      opts.Types,
		Where:      opts.Where,
		Filter:     opts.Filter,
		Start:      opts.Start,
		OldRecords: opts.OldRecords,
		BatchSize:  opts.BatchSize,
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &Watcher{
		cancel: cancel, c: c, ctx: ctx, req: req,
		noResume: opts.NoResume, resumeFor: opts.ResumeFor, progress: opts.ProgressBatches,
	}
	if err := w.open(); err != nil {
		w.end(err)
		return nil, fmt.Errorf("watch: %w", w.err)
	}
	// The first message names the start; an error before it is the
	// caller's (a refusal, or no server to watch): there is no position
	// to resume from yet.
	w.recv.reuse = true
	if err := w.stream.RecvMsg(&w.recv); err != nil {
		w.end(err)
		return nil, fmt.Errorf("watch: %w", w.err)
	}
	w.take(&w.recv.resp)
	return w, nil
}

// open starts a stream of the request as it stands.
func (w *Watcher) open() error {
	ctx, cancel := context.WithCancel(w.ctx)
	st, err := w.c.api.Watch(ctx, w.req)
	if err != nil {
		cancel()
		return err
	}
	if w.streamCancel != nil {
		w.streamCancel()
	}
	w.stream, w.streamCancel = st, cancel
	return nil
}

// receive waits for the next message and makes its changes the ones Next
// returns next, resuming the stream when it fails and may be resumed;
// false when the watch ended (w.err says why).
func (w *Watcher) receive() bool {
	w.recv.reuse = !w.lent
	for {
		err := w.stream.RecvMsg(&w.recv)
		if err == nil {
			break
		}
		if err = w.restart(err); err != nil {
			w.end(err)
			return false
		}
	}
	w.failedAt = time.Time{}
	w.lent = false
	w.take(&w.recv.resp)
	return true
}

// Next waits for the next change and reports whether there is one.
func (w *Watcher) Next() bool {
	for len(w.cur) == 0 {
		if w.err != nil || !w.receive() {
			return false
		}
	}
	w.lent, w.batch = true, nil
	w.ch, w.cur = w.cur[0], w.cur[1:]
	if len(w.cur) > 0 {
		w.resume.Store(w.ch.GetPosition())
	} else {
		w.resume.Store(w.pos)
	}
	return true
}

// NextBatch waits for the next message with changes and reports whether
// there is one: Batch then returns its changes (those Next has not
// returned yet), and Position the point after them. A batch and its
// changes are valid until the next call to NextBatch or Next, which may
// decode the next message over them: proto.Clone what you keep. With
// WatchOptions.ProgressBatches a message that only moves Position on
// is a batch too, an empty one.
func (w *Watcher) NextBatch() bool {
	for len(w.cur) == 0 {
		before := w.pos
		if w.err != nil || !w.receive() {
			return false
		}
		if w.progress && len(w.cur) == 0 && w.pos != before {
			w.batch, w.ch = nil, nil
			return true
		}
	}
	w.batch, w.cur, w.ch = w.cur, nil, nil
	w.resume.Store(w.pos)
	return true
}

// Batch is the current batch (see NextBatch).
func (w *Watcher) Batch() []*pb.Change { return w.batch }

// take makes resp's changes the ones Next returns next.
func (w *Watcher) take(resp *pb.WatchResponse) {
	w.cur = resp.GetChanges()
	pos := w.pos
	if len(w.cur) > 0 {
		pos = w.cur[len(w.cur)-1].GetPosition()
	}
	// Progress covers this message's changes and moves the resume point
	// past changes filtered out after them.
	if p := resp.GetProgress(); p != nil && !positionBefore(p, pos) {
		pos = p
	}
	if pos != w.pos {
		w.pos = clonePosition(pos)
	}
	if len(w.cur) == 0 {
		// Progress only: the watch moved on while Next waits.
		w.resume.Store(w.pos)
	}
}

// end records why the watch ended; a watch closed by Close or by its
// context ends without error.
func (w *Watcher) end(err error) {
	w.cancel()
	if w.streamCancel != nil {
		w.streamCancel()
	}
	w.recv.reuse = !w.lent
	w.recv.release()
	w.batch, w.cur = nil, nil
	switch {
	case w.closed.Load():
		w.err = errWatchClosed
	case errors.Is(err, io.EOF):
		w.err = errors.New("watch: the server ended the stream without a status")
	default:
		w.err = asError(err)
	}
}

// errWatchClosed marks a watch ended by Close; Err reports it as nil.
var errWatchClosed = errors.New("watch closed")

// Change is the current change. Its records' values point into the
// bytes of the message it came in (decoded into one slab per message):
// a change kept keeps that message's bytes alive.
func (w *Watcher) Change() *pb.Change { return w.ch }

// Position is where a new watch resumes (StartAfter) to send every change
// that Next has not yet returned, once: the position of the change Next
// returned last, or, once every change of its message was read, the
// server's progress mark past it (the changes it filtered out since were
// considered). Before the first change it is the start the server named.
//
// Position may be called from any goroutine, also while Next waits: a
// watch whose filter drops every change still moves on with the server's
// progress marks, so a checkpoint taken then skips what it dropped. The
// position must not be modified.
func (w *Watcher) Position() *pb.Position { return w.resume.Load() }

// Err is the error that ended the watch: nil after Close or while it runs.
// A server status is a *Error (OUT_OF_RANGE names the oldest position the
// server keeps; UNAVAILABLE when it stops and resuming was off or gave up).
func (w *Watcher) Err() error {
	if errors.Is(w.err, errWatchClosed) {
		return nil
	}
	return w.err
}

// Close ends the watch; a Next waiting in another goroutine returns false.
func (w *Watcher) Close() {
	w.closed.Store(true)
	w.cancel()
}

// clonePosition copies p (nil stays nil).
func clonePosition(p *pb.Position) *pb.Position {
	if p == nil {
		return nil
	}
	c := &pb.Position{Commit: p.GetCommit()}
	if p.Index != nil {
		i := *p.Index
		c.Index = &i
	}
	return c
}

// positionBefore reports whether a comes before b in commit order; a nil
// b is before everything. An index absent means the whole commit, after
// every index in it.
func positionBefore(a, b *pb.Position) bool {
	if b == nil {
		return false
	}
	if a.GetCommit() != b.GetCommit() {
		return a.GetCommit() < b.GetCommit()
	}
	switch {
	case b.Index == nil:
		return a.Index != nil
	case a.Index == nil:
		return false
	}
	return a.GetIndex() < b.GetIndex()
}
