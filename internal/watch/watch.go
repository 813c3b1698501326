// Package watch owns Watch streams: the committed, durable changes of
// record types sent in commit order from a start position, for as long as
// the client reads (docs/watch.md).
//
// A watch validates its request (types, filter, start, batch size),
// reads the change log (internal/changelog) from its position up to the
// durable watermark — from the log's tail in memory or from storage, in
// rounds — or, on a Shared store, the store's own feed (feed.go); filters
// each change on the record's bytes; encodes the matching ones as
// WatchResponse wire bytes itself (encode.go), sharing the encoding
// between watchers asking for the same changes (share.go); fits changes
// into messages the clients receive, leaving out records that do not fit
// (old_record_omitted, record_omitted); holds each response's bytes in
// the engine's result budget until the transport has sent them; and
// sends progress, so that a watcher resumes from the last position it
// received without a gap or a duplicate.
//
// It reads the engine through engine.WatchSource and never its state;
// the engine does not import it. The transports (gRPC, and REST through
// the gRPC service) call Service.Watch.
package watch

import (
	"context"
	"sync"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store"
)

// progressEvery is how long a watcher whose filter matches nothing goes
// without a message while its position moves: it then gets a
// progress-only message, so that it can resume from there.
const progressEvery = 2 * time.Second

// roundResponses bounds the responses sent from one log iterator: a
// watcher far behind reads the log in rounds, each on a fresh iterator, so
// a slow client never pins one storage version for long.
const roundResponses = 16

// syncDelay is how long a watcher lets a batch stay applied but not known
// durable before it makes the batch durable itself (changelog.Log.Sync).
const syncDelay = 20 * time.Millisecond

// errStopped ends the watches of a server shutting down.
var errStopped = apierror.New(apierror.Unavailable,
	"the server is shutting down: watch again (on this or another server) from the last position received")

// DefaultMaxSendBytes is the default of Options.MaxSendBytes.
const DefaultMaxSendBytes = 64 << 20

// Options configure a Service.
type Options struct {
	// MaxSendBytes bounds one Watch response, a message the transport
	// sends and a client receives (0: DefaultMaxSendBytes): a change that
	// would not fit one leaves out its old record, or its record too, and
	// says so.
	MaxSendBytes int
}

// Service serves the Watch calls of one engine. It is safe for concurrent
// use.
type Service struct {
	src  engine.WatchSource
	opts Options
	// share holds the encoded changes that watchers asking for the same
	// ones share (share.go).
	share shareCache
	// stop is closed by Stop; done is the engine's Done.
	stop     chan struct{}
	stopOnce sync.Once
	done     <-chan struct{}
}

// New returns the Watch service of src.
func New(src engine.WatchSource, opts Options) *Service {
	if opts.MaxSendBytes <= 0 {
		opts.MaxSendBytes = DefaultMaxSendBytes
	}
	return &Service{src: src, opts: opts, stop: make(chan struct{}), done: src.Done()}
}

// Stop ends every Watch call, now and later, with UNAVAILABLE: a server
// shutting down calls it first, as watches never end on their own and
// would hold up a graceful stop.
func (s *Service) Stop() {
	s.stopOnce.Do(func() { close(s.stop) })
}

// Watch streams the committed, durable changes of the requested record
// types after the request's start, in commit order, until ctx ends; see
// docs/watch.md. The first message is progress-only and names the start
// position. send is called from one goroutine at a time, with a buffer
// of grpcbuf.Pool holding the wire bytes of one WatchResponse, which it
// takes over: it hands it on to gRPC (grpcbuf.Frame.Owned: the response
// is sent without another copy) or leaves it to the GC or the pool, and
// with it h, the response's bytes of the result budget, which send
// releases once it no longer holds them (see engine.Hold).
func (s *Service) Watch(ctx context.Context, req *pb.WatchRequest, send func(*[]byte, engine.Hold) error) error {
	select {
	case <-s.done:
		return engine.ErrClosed
	default:
	}
	w, err := s.newWatch(req, send)
	if err != nil {
		return err
	}
	defer w.release()
	if w.shareKey != "" {
		s.share.join(w.shareKey)
		defer s.share.leave(w.shareKey)
	}
	w.stats.Watches.Add(1)
	defer w.stats.Watches.Add(-1)
	if st := s.src.Store(); st.Shared() {
		feed, ok := st.(store.Feed)
		if !ok {
			return apierror.New(apierror.FailedPrecondition, "this store keeps no change feed: Watch is not available on it")
		}
		return w.runFeed(ctx, feed)
	}
	if !w.log.On() {
		return apierror.New(apierror.FailedPrecondition,
			"the server keeps no change log (watch retention is 0): start it with --watch-retention set to a duration, such as 24h, to watch changes")
	}
	w.rd = w.log.NewReader(w.reserveCarry)
	defer w.rd.Close()
	return w.runLog(ctx)
}

// watchType is one watched record type with its filter (nil: all).
type watchType struct {
	engine.WatchType
	// typeField is the type's name encoded as Change.type, with its tag
	// (encodeNames; nil until the first change).
	typeField []byte
}

// watch is one Watch call. It belongs to the call's goroutine.
type watch struct {
	s     *Service
	log   *changelog.Log
	stats *engine.Stats
	// obs takes the delivery lag of each response (nil: none); at is the
	// commit time (unix ns, the change log's clock) of the entry whose
	// changes are being added, 0 on a feed, which has none.
	obs       engine.Observer
	at        int64
	types     map[uint32]*watchType
	lastType  *watchType // the last found in types, or nil
	start     *pb.WatchStart
	old       bool
	batchSize int
	send      func(*[]byte, engine.Hold) error

	pos      position
	lastSent position // progress of the last message sent
	sentAny  bool

	// The response being built, with the record bytes it holds (against
	// the result limits) and the result budget it holds.
	resp respEnc
	size int
	h    engine.Reservation
	// maxBytes is the record bytes after which a response is sent
	// (engine.Options.MaxResultBytes); budget the whole result budget
	// (MaxResultBufferBytes); room the most bytes of a response
	// (Service.room).
	maxBytes int
	budget   int64
	room     int

	// shareKey names the changes this watcher asks for, which watchers
	// asking for the same share (share.go); "" for none. fill is the
	// entry being built for them while one is.
	shareKey string
	fill     *sharedEntry

	// rd reads the change log; reserveCarry is the hook it calls before
	// holding a large change read across parts of an entry (carry), made
	// once; ctx the context it waits in, the round's.
	rd           *changelog.Reader
	reserveCarry func(n int) error
	ctx          context.Context
}

// newWatch validates a request: its types, its filter and its batch size.
func (s *Service) newWatch(req *pb.WatchRequest, send func(*[]byte, engine.Hold) error) (*watch, error) {
	if len(req.GetTypes()) == 0 {
		return nil, &apierror.Error{Code: apierror.InvalidArgument, Msg: "watch names no record type: set types", Field: "types"}
	}
	opts := s.src.Options()
	w := &watch{s: s, log: s.src.ChangeLog(), stats: s.src.Stats(), obs: opts.Observer, types: map[uint32]*watchType{},
		start: req.GetStart(), old: req.GetOldRecords(), send: send, h: s.src.Reservation(),
		maxBytes: opts.MaxResultBytes, budget: opts.MaxResultBufferBytes, room: s.room(opts)}
	w.reserveCarry = w.coverCarry
	w.batchSize = int(req.GetBatchSize())
	if w.batchSize <= 0 || w.batchSize > opts.MaxResultRecords*10 {
		w.batchSize = opts.MaxResultRecords
	}
	ver := s.src.Schema().Version
	seen := map[string]bool{}
	for _, name := range req.GetTypes() {
		if seen[name] {
			continue
		}
		seen[name] = true
		// The filter is compiled as a query on each type: the same
		// errors as Query, and fields resolved in each type.
		t, err := s.src.WatchType(name, req.GetWhere(), req.GetFilter())
		if err != nil {
			return nil, err
		}
		w.types[t.ID] = &watchType{WatchType: t}
	}
	if s.src.Schema().Version == ver {
		w.shareKey = shareKeyOf(req, ver)
	}
	return w, nil
}

// runLog serves the watch from the engine's change log.
func (w *watch) runLog(ctx context.Context) error {
	wm, _ := w.log.Durable().Load()
	if err := w.startLog(wm); err != nil {
		return err
	}
	if err := w.progress(); err != nil {
		return err
	}
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	// lag fires syncDelay after the watcher first saw a batch applied
	// beyond the durable watermark lagFrom.
	lag := time.NewTimer(time.Hour)
	lag.Stop()
	defer lag.Stop()
	armed, lagFrom := false, uint64(0)
	for {
		wm, moved := w.log.Durable().Load()
		if w.pos.commit < wm || (w.pos.part && w.pos.commit <= wm) {
			if err := w.round(ctx, wm); err != nil {
				return err
			}
			continue
		}
		applied, appliedMoved := w.log.Visible().Load()
		if applied > wm && (!armed || lagFrom != wm) {
			lag.Reset(syncDelay)
			armed, lagFrom = true, wm
		}
		fired, err := w.wait(ctx, moved, appliedMoved, lag.C, tick.C)
		if err != nil {
			return err
		}
		armed = armed && !fired
	}
}

// wait waits for the watermark (or the applied commit) to move, for a
// batch to lag too long (then makes it durable; fired), or for the
// progress tick (then sends a progress message if the position moved).
func (w *watch) wait(ctx context.Context, moved, appliedMoved <-chan struct{}, lag, tick <-chan time.Time) (fired bool, err error) {
	select {
	case <-moved:
	case <-appliedMoved:
	case <-lag:
		return true, w.log.Sync()
	case <-tick:
		if w.pos != w.lastSent {
			return false, w.progress()
		}
	case <-ctx.Done():
		return false, ctx.Err()
	case <-w.s.done:
		return false, engine.ErrClosed
	case <-w.s.stop:
		return false, errStopped
	}
	return false, nil
}

// alive returns why the watch must end now, if it must: its context ended,
// the server stops its watches, or the engine closed. Reading the log
// checks it between entries, so that a watcher reading far behind (or
// past a change its filter never matches) stops when its client goes.
func (w *watch) alive(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-w.s.stop:
		return errStopped
	case <-w.s.done:
		return engine.ErrClosed
	default:
		return nil
	}
}
