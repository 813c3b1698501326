package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/protoadapt"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/grpcbuf"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/store"
)

// watchProgressEvery is how long a watcher whose filter matches nothing
// goes without a message while its position moves: it then gets a
// progress-only message, so that it can resume from there.
const watchProgressEvery = 2 * time.Second

// watchRoundResponses bounds the responses sent from one log iterator: a
// watcher far behind reads the log in rounds, each on a fresh iterator, so
// a slow client never pins one storage version for long.
const watchRoundResponses = 16

// watchSyncDelay is how long a watcher lets a batch stay applied but not
// known durable before it makes the batch durable itself (syncLog).
const watchSyncDelay = 20 * time.Millisecond

// errWatchStopped ends the watches of a server shutting down.
var errWatchStopped = apierror.New(codes.Unavailable,
	"the server is shutting down: watch again (on this or another server) from the last position received")

// Watch streams the committed, durable changes of the requested record
// types after the request's start, in commit order, until ctx ends; see
// docs/watch.md. The first message is progress-only and names the start
// position. send is called from one goroutine at a time, with a buffer
// of grpcbuf.Pool holding the wire bytes of one WatchResponse, which it
// takes over: it hands it on to gRPC (grpcbuf.Frame.Owned: the response
// is sent without another copy) or leaves it to the GC or the pool, and
// with it h, the response's bytes of the result budget, which send
// releases once it no longer holds them (see Hold).
func (e *Engine) Watch(ctx context.Context, req *pb.WatchRequest, send func(*[]byte, Hold) error) error {
	if e.closed.Load() {
		return ErrClosed
	}
	w, err := e.newWatch(req, send)
	if err != nil {
		return err
	}
	defer w.release()
	if w.shareKey != "" {
		e.share.join(w.shareKey)
		defer e.share.leave(w.shareKey)
	}
	e.stats.Watches.Add(1)
	defer e.stats.Watches.Add(-1)
	if e.st.Shared() {
		feed, ok := e.st.(store.Feed)
		if !ok {
			return apierror.New(codes.FailedPrecondition, "this store keeps no change feed: Watch is not available on it")
		}
		return w.runFeed(ctx, feed)
	}
	if !e.logOn {
		return apierror.New(codes.FailedPrecondition,
			"the server keeps no change log (watch retention is 0): start it with --watch-retention set to a duration, such as 24h, to watch changes")
	}
	w.e.tail.join()
	defer w.e.tail.leave()
	return w.runLog(ctx)
}

// position is where a watcher stands: every change up to it has been
// considered. part says the commit is considered up to change index only;
// else the whole commit is.
type position struct {
	commit uint64
	index  uint32
	part   bool
}

// watchType is one watched record type with its filter (nil: all).
type watchType struct {
	t      *recType
	name   string
	filter *query.Filter
	// typeField is name encoded as Change.type, with its tag
	// (encodeNames; nil until the first change).
	typeField []byte
}

// watch is one Watch call. It belongs to the call's goroutine.
type watch struct {
	e         *Engine
	types     map[uint32]*watchType
	lastType  *watchType // the last found in types, or nil
	start     *pb.WatchStart
	old       bool
	batchSize int
	send      func(*[]byte, Hold) error

	pos      position
	lastSent position // progress of the last message sent
	sentAny  bool

	// The response being built, with the record bytes it holds (against
	// the result limits) and the result budget it holds.
	resp respEnc
	size int
	h    hold // what the response being built holds of the result budget

	// shareKey names the changes this watcher asks for, which watchers
	// asking for the same share (watchshare.go); "" for none. fill is
	// the entry being built for them while one is.
	shareKey string
	fill     *sharedEntry

	// parts reads the entries stored in parts (watchparts.go).
	parts logParts
	// room is the most bytes of a response (Engine.watchRoom).
	room int
	// reserveCarry is parts.reserve, made once; ctx the context it waits
	// in, the round's.
	reserveCarry func(n int) error
	ctx          context.Context
}

// newWatch validates a request: its types, its filter and its batch size.
func (e *Engine) newWatch(req *pb.WatchRequest, send func(*[]byte, Hold) error) (*watch, error) {
	if len(req.GetTypes()) == 0 {
		return nil, &apierror.Error{Code: codes.InvalidArgument, Msg: "watch names no record type: set types", Field: "types"}
	}
	if req.GetFilter() != "" && req.GetWhere() != nil {
		return nil, filterError("watch has both filter and where: set one of them", nil)
	}
	w := &watch{e: e, types: map[uint32]*watchType{}, start: req.GetStart(), old: req.GetOldRecords(), send: send, room: e.watchRoom()}
	w.batchSize = int(req.GetBatchSize())
	if w.batchSize <= 0 || w.batchSize > e.opts.MaxResultRecords*10 {
		w.batchSize = e.opts.MaxResultRecords
	}
	ver := e.cat.Load().state.Version
	seen := map[string]bool{}
	for _, name := range req.GetTypes() {
		if seen[name] {
			continue
		}
		seen[name] = true
		// The filter is compiled as a query on each type: the same
		// errors as Query, and fields resolved in each type.
		c, err := e.compile(&pb.Query{Type: name, Where: req.GetWhere(), Filter: req.GetFilter()})
		if err != nil {
			return nil, err
		}
		w.types[c.t.rt.ID] = &watchType{t: c.t, name: string(c.t.rt.Name), filter: c.plan.Match()}
	}
	if e.cat.Load().state.Version == ver {
		w.shareKey = shareKeyOf(req, ver)
	}
	return w, nil
}

// runLog serves the watch from the engine's change log.
func (w *watch) runLog(ctx context.Context) error {
	wm, _ := w.e.durable.load()
	if err := w.startLog(wm); err != nil {
		return err
	}
	if err := w.progress(); err != nil {
		return err
	}
	tick := time.NewTicker(watchProgressEvery)
	defer tick.Stop()
	// lag fires watchSyncDelay after the watcher first saw a batch applied
	// beyond the durable watermark lagFrom.
	lag := time.NewTimer(time.Hour)
	lag.Stop()
	defer lag.Stop()
	armed, lagFrom := false, uint64(0)
	for {
		wm, moved := w.e.durable.load()
		if w.pos.commit < wm || (w.pos.part && w.pos.commit <= wm) {
			if err := w.round(ctx, wm); err != nil {
				return err
			}
			continue
		}
		applied, appliedMoved := w.e.applied.load()
		if applied > wm && (!armed || lagFrom != wm) {
			lag.Reset(watchSyncDelay)
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
		return true, w.e.syncLog()
	case <-tick:
		if w.pos != w.lastSent {
			return false, w.progress()
		}
	case <-ctx.Done():
		return false, ctx.Err()
	case <-w.e.bgCtx.Done():
		return false, ErrClosed
	case <-w.e.watchStop:
		return false, errWatchStopped
	}
	return false, nil
}

// startLog sets the position the request's start names, checking that the
// log holds what follows it; wm is the durable watermark.
func (w *watch) startLog(wm uint64) error {
	switch s := w.start.GetStart().(type) {
	case nil, *pb.WatchStart_Now:
		w.pos = position{commit: wm}
		return nil
	case *pb.WatchStart_Oldest:
		first, ok, err := w.e.firstLogCommit()
		if err != nil {
			return err
		}
		w.pos = position{commit: wm}
		if ok {
			w.pos.commit = first - 1
		}
		return nil
	case *pb.WatchStart_After:
		p := s.After
		if p == nil {
			return &apierror.Error{Code: codes.InvalidArgument, Msg: "start.after holds no position", Field: "start.after"}
		}
		w.pos = position{commit: p.GetCommit()}
		if p.Index != nil {
			if p.GetCommit() == 0 {
				return &apierror.Error{Code: codes.InvalidArgument, Msg: "start.after has a change index but no commit", Field: "start.after.commit"}
			}
			w.pos.index, w.pos.part = p.GetIndex(), true
		}
		if w.pos.commit > wm {
			oldest, err := w.e.oldestPosition(wm)
			if err != nil {
				return err
			}
			return w.e.outOfRange("position "+formatPos(w.pos)+" is past the last durable commit "+u64(wm)+
				": it is not from this database's history (a restored backup, or another server)", oldest, int64(wm)) //nolint:gosec // commit sequences stay far below 2^63
		}
		return w.checkHeld(wm)
	}
	return &apierror.Error{Code: codes.InvalidArgument, Msg: "unknown start", Field: "start"}
}

// checkHeld checks that the log holds the commit after the position (the
// position's own commit when only part of it is considered).
func (w *watch) checkHeld(wm uint64) error {
	from := w.pos.commit + 1
	if w.pos.part {
		from = w.pos.commit
	}
	if from > wm {
		return nil
	}
	first, ok, err := w.e.firstLogCommit()
	if err != nil {
		return err
	}
	if ok && first <= from {
		return nil
	}
	return w.e.logGap(formatPos(w.pos), wm)
}

// firstLogCommit returns the oldest commit the log holds.
func (e *Engine) firstLogCommit() (uint64, bool, error) {
	it, err := e.st.NewIterator(logStart, logEnd)
	if err != nil {
		return 0, false, storeError(err)
	}
	defer it.Close()
	if !it.First() {
		return 0, false, storeError(it.Error())
	}
	c, _, ok := entryCommit(it.Key())
	return c, ok, nil
}

// logGap is the OUT_OF_RANGE of a position whose next changes the log no
// longer holds (trimmed, or written while the log was off).
func (e *Engine) logGap(pos string, wm uint64) error {
	oldest, err := e.oldestPosition(wm)
	if err != nil {
		return err
	}
	return e.outOfRange("the change log no longer holds the changes after position "+pos+
		" (trimmed by the retention, or written while the log was off)", oldest, int64(wm)) //nolint:gosec // commit sequences stay far below 2^63
}

// oldestPosition is the oldest position a watch can start after: the
// commit before the oldest the log holds, or wm when it holds none.
func (e *Engine) oldestPosition(wm uint64) (int64, error) {
	first, ok, err := e.firstLogCommit()
	if err != nil {
		return 0, err
	}
	if ok {
		wm = first - 1
	}
	return int64(wm), nil //nolint:gosec // commit sequences stay far below 2^63
}

// outOfRange builds the OUT_OF_RANGE of a start the log cannot serve,
// naming the positions a watch can start after, from oldest to newest (a
// bound of -1 is not known), in the message, and the oldest as a Position
// detail.
func (e *Engine) outOfRange(msg string, oldest, newest int64) error {
	var details []protoadapt.MessageV1
	switch {
	case oldest >= 0 && newest >= 0:
		msg += "; the oldest position available is commit " + i64(oldest) + " and the newest commit " + i64(newest) +
			" (start after one of them, or at oldest)"
	case oldest >= 0:
		msg += "; the oldest position available is commit " + i64(oldest) + " (start after it or a later one, or at oldest)"
	default:
		msg += "; the newest position available is commit " + i64(newest) + " (start after it or an earlier one still kept, or at oldest)"
	}
	if oldest >= 0 {
		details = []protoadapt.MessageV1{protoadapt.MessageV1Of(&pb.Position{Commit: uint64(oldest)})}
	}
	return &apierror.Error{Code: codes.OutOfRange, Msg: msg, Field: "start", Details: details}
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// round reads the log after the position up to wm, from the tail when it
// holds the next commit, else on one storage iterator, and sends what
// matches, for at most watchRoundResponses responses.
func (w *watch) round(ctx context.Context, wm uint64) error {
	from := w.pos.commit + 1
	if w.pos.part {
		from = w.pos.commit
	}
	if ok, err := w.tailRound(ctx, from, wm); ok || err != nil {
		return err
	}
	it, err := w.e.st.NewIterator(logKey(from), logKey(wm+1))
	if err != nil {
		return storeError(err)
	}
	defer it.Close()
	expect := from
	sent := 0
	for ok := it.First(); ok && sent < watchRoundResponses; ok = it.Next() {
		if err := w.alive(ctx); err != nil {
			return err
		}
		c, isKey := logCommit(it.Key())
		if !isKey {
			return w.corrupt(expect, errLogEntry) // a part with no entry before it
		}
		if c != expect {
			return w.e.logGap(formatPos(w.pos), wm)
		}
		w.parts.reserve = w.carryReserver(ctx)
		le, err := readLogEntry(it, c, &w.parts)
		if err != nil {
			return w.corrupt(c, err)
		}
		n, err := w.entry(ctx, c, &le)
		if err != nil {
			return err
		}
		if err := le.parts.done(); err != nil {
			return w.corrupt(c, err)
		}
		sent += n
		w.pos = position{commit: c}
		expect = c + 1
	}
	if err := it.Error(); err != nil {
		return storeError(fmt.Errorf("read the change log at commit %d: %w", expect, err))
	}
	if expect == from {
		return w.e.logGap(formatPos(w.pos), wm)
	}
	return w.flush()
}

// carryReserver returns the hook that covers a large change read across
// parts of an entry (logParts.reserve): the response built so far is sent
// first, with the position before the change, and the wait holds
// nothing; the change is covered twice, as read and as copied into the
// response, no more than the whole budget.
func (w *watch) carryReserver(ctx context.Context) func(n int) error {
	if w.reserveCarry == nil {
		w.reserveCarry = func(n int) error {
			if err := w.flush(); err != nil {
				return err
			}
			need := min(2*int64(n)+minHeld, w.e.opts.MaxResultBufferBytes)
			return w.e.cover(w.ctx, &w.h, need, true)
		}
	}
	w.ctx = ctx
	return w.reserveCarry
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
	case <-w.e.watchStop:
		return errWatchStopped
	case <-w.e.bgCtx.Done():
		return ErrClosed
	default:
		return nil
	}
}

// tailRound is round from the log's tail; ok is false when the tail
// does not hold commit from. It stops at the first commit the tail does
// not hold (evicted meanwhile): the next round reads it from storage.
func (w *watch) tailRound(ctx context.Context, from, wm uint64) (ok bool, err error) {
	sent := 0
	for c := from; c <= wm && sent < watchRoundResponses; c++ {
		if err := w.alive(ctx); err != nil {
			return true, err
		}
		te := w.e.tail.get(c)
		if te == nil {
			break
		}
		ok = true
		n, err := w.tailEntry(ctx, c, te)
		if err != nil {
			return true, err
		}
		sent += n
		w.pos = position{commit: c}
	}
	if !ok {
		return false, nil
	}
	return true, w.flush()
}

// tailEntry considers the changes of commit c held by te.
func (w *watch) tailEntry(ctx context.Context, c uint64, te *tailEntry) (int, error) {
	defer w.e.tail.release(te)
	le, err := parseLogEntry(te.b)
	if err != nil {
		return 0, w.corrupt(c, err)
	}
	return w.entry(ctx, c, &le)
}

func (w *watch) corrupt(c uint64, err error) error {
	return &apierror.Error{Code: codes.Internal, Msg: "change log entry of commit " + u64(c) + ": " + err.Error(), Err: err}
}

// entry considers the changes of commit c after the position and returns
// how many responses it sent.
func (w *watch) entry(ctx context.Context, c uint64, le *logEntry) (int, error) {
	whole := !w.pos.part || w.pos.commit != c
	if whole && w.shareKey != "" {
		se, fill := w.e.share.get(w.shareKey, c)
		if se != nil {
			return w.replay(ctx, c, se)
		}
		if fill && le.size <= watchShareBytes/4 { // a larger one is not kept (watchShare.put)
			// Sized from the entry at once: grown by append, the copies
			// were a tenth of the CPU with ten watchers.
			w.fill = &sharedEntry{b: make([]byte, 0, 3*le.size+1024), chs: make([]sharedChange, 0, 64)}
			defer func() { w.fill = nil }()
		}
	}
	sent := 0
	var ch logChange
	for {
		ok, err := le.next(&ch)
		if err != nil {
			return sent, w.corrupt(c, err)
		}
		if !ok {
			if w.fill != nil {
				w.e.share.put(w.shareKey, c, w.fill)
			}
			return sent, nil
		}
		if w.pos.part && c == w.pos.commit && ch.index <= w.pos.index {
			continue
		}
		w.pos = position{commit: c, index: ch.index, part: true}
		full, err := w.consider(ctx, c, ch.index, ch.op, ch.typeID, ch.rec, ch.old)
		if err != nil {
			return sent, err
		}
		if le.parts != nil {
			// A large change's carry goes, and so does the budget it
			// held unless the response holds the change now.
			le.shrink()
			if !w.resp.open() {
				w.e.release(&w.h)
			}
		}
		if full {
			if err := w.flush(); err != nil {
				return sent, err
			}
			sent++
		}
	}
}

// consider adds one change to the response when its type is watched and
// it matches the filter; full says the response is due to be sent. rec
// and old are copied into the response's bytes.
func (w *watch) consider(ctx context.Context, c uint64, index uint32, op byte, typeID uint32, rec, old []byte) (full bool, err error) {
	// Batches are mostly of one type: the last type looked up saves a
	// map lookup per change.
	wt := w.lastType
	if wt == nil || wt.t.rt.ID != typeID {
		wt = w.types[typeID]
		w.lastType = wt
	}
	if wt == nil {
		return false, nil
	}
	match := rec
	if op == changeRemove {
		match = old
	}
	if ok, err := wt.filter.Match(match); err != nil {
		return false, &apierror.Error{Code: codes.Internal, Msg: "changed record of " + wt.name + " unreadable: " + err.Error(), Err: err}
	} else if !ok {
		return false, nil
	}
	withRec, withOld := op != changeRemove, w.old && op != changeInsert
	cost := len(match) // the key, taken from it, is no longer
	if withRec {
		cost += len(rec)
	}
	if withOld {
		cost += len(old)
	}
	var om omitted
	if w.resp.len()+cost+len(wt.name)+3*len(wt.t.urlField)+changeSlack > w.room {
		// Rare: a change near the largest message sent.
		if withRec, withOld, om, err = w.fit(c, index, wt, match, rec, old, withRec, withOld); err != nil {
			return false, err
		}
		cost = len(match)
		if withRec {
			cost += len(rec)
		}
		if withOld {
			cost += len(old)
		}
	}
	if err := w.open(ctx); err != nil {
		return false, err
	}
	if err := w.e.cover(ctx, &w.h, int64(w.size+cost), w.resp.n == 0); err != nil {
		return false, err
	}
	from := len(*w.resp.bp)
	w.resp.addChange(c, index, op, wt, match, rec, old, withRec, withOld, om)
	cost += len(w.resp.key) - len(match)
	if f := w.fill; f != nil {
		f.b = append(f.b, (*w.resp.bp)[from:]...)
		f.chs = append(f.chs, sharedChange{index: index, end: len(f.b), cost: cost})
	}
	w.size += cost
	return w.resp.n >= w.batchSize || w.size >= w.e.opts.MaxResultBytes, nil
}

// changeSlack bounds a change's bytes besides its key, records, type
// name and type URLs: tags, lengths, op, position, flags (about 80 at
// most).
const changeSlack = 128

// watchRoom is the most bytes one watch response may hold: what the
// transport sends in one message (MaxSendBytes), and no more than the
// whole result budget, less the progress.
func (e *Engine) watchRoom() int {
	return int(min(int64(e.opts.MaxSendBytes), e.opts.MaxResultBufferBytes)) - sizePosField
}

// fit decides which records of a change near the message limit it sends:
// the old record goes when the change would not fit one message with it,
// the record too when the change would not fit with it either (what is
// left, the key, is within the transport's limit: it is cut from a record
// that arrived in one message). The response being built is sent first when the change fits
// a message but not beside it.
func (w *watch) fit(c uint64, index uint32, wt *watchType, match, rec, old []byte, withRec, withOld bool) (bool, bool, omitted, error) {
	var om omitted
	room := w.room
	w.resp.key = appendKeyFields(w.resp.key[:0], match, wt.t.pkNums)
	keyLen := len(w.resp.key)
	size, _ := changeSize(c, index, wt, keyLen, len(rec), len(old), withRec, withOld, om)
	if size > room && withOld {
		withOld, om.old = false, true
		size, _ = changeSize(c, index, wt, keyLen, len(rec), 0, withRec, false, om)
	}
	if size > room && withRec {
		withRec, om.rec = false, true
		size, _ = changeSize(c, index, wt, keyLen, 0, 0, false, false, om)
	}
	if w.resp.n > 0 && w.resp.len()+size > room {
		if err := w.flushBefore(c, index); err != nil {
			return false, false, om, err
		}
	}
	return withRec, withOld, om, nil
}

// flushBefore sends the response being built before change index of
// commit c is added to it, with the progress up to the change before.
func (w *watch) flushBefore(c uint64, index uint32) error {
	at := w.pos
	w.pos = position{commit: c - 1}
	if index > 0 {
		w.pos = position{commit: c, index: index - 1, part: true}
	}
	err := w.flush()
	w.pos = at
	return err
}

// open starts a response when none is being built, holding its result
// budget.
func (w *watch) open(ctx context.Context) error {
	if w.resp.open() {
		return nil
	}
	if err := w.e.reserve(ctx, &w.h); err != nil {
		return err
	}
	w.resp.start()
	return nil
}

// replay adds the changes of commit c that another watcher asking for the
// same ones encoded (se), batching them as entry would, and returns how
// many responses it sent.
func (w *watch) replay(ctx context.Context, c uint64, se *sharedEntry) (int, error) {
	sent, start := 0, 0
	for _, ch := range se.chs {
		w.pos = position{commit: c, index: ch.index, part: true}
		if w.resp.n > 0 && w.resp.len()+ch.end-start > w.room {
			if err := w.flushBefore(c, ch.index); err != nil {
				return sent, err
			}
			sent++
		}
		if err := w.open(ctx); err != nil {
			return sent, err
		}
		if err := w.e.cover(ctx, &w.h, int64(w.size+ch.cost), w.resp.n == 0); err != nil {
			return sent, err
		}
		w.resp.appendRaw(se.b[start:ch.end])
		start = ch.end
		w.size += ch.cost
		if w.resp.n >= w.batchSize || w.size >= w.e.opts.MaxResultBytes {
			if err := w.flush(); err != nil {
				return sent, err
			}
			sent++
		}
	}
	return sent, nil
}

// flush sends the response being built, if any, with the position as its
// progress.
func (w *watch) flush() error {
	if !w.resp.open() {
		return nil
	}
	w.e.stats.WatchChanges.Add(uint64(w.resp.n))
	err := w.send(w.resp.take(w.pos), w.e.take(&w.h, w.size))
	w.size = 0
	w.release()
	w.lastSent, w.sentAny = w.pos, true
	return err
}

// progress sends a progress-only message.
func (w *watch) progress() error {
	w.lastSent, w.sentAny = w.pos, true
	bp := grpcbuf.Pool.Get(sizePosField)
	*bp = appendProgress((*bp)[:0], w.pos)
	return w.send(bp, Hold{})
}

// release gives back the result budget an unsent response holds (and
// the buffer of one never finished).
func (w *watch) release() {
	w.resp.release()
	w.e.release(&w.h)
}

func formatPos(p position) string {
	s := "{commit " + u64(p.commit)
	if p.part {
		s += ", index " + strconv.FormatUint(uint64(p.index), 10)
	}
	return s + "}"
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }
