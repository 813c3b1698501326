package watch

import (
	"context"
	"time"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/grpcbuf"
	"github.com/protobase/protobase/internal/wire"
)

// consider adds one change to the response when its type is watched and
// it matches the filter; full says the response is due to be sent. rec
// and old are copied into the response's bytes.
func (w *watch) consider(ctx context.Context, c uint64, index uint32, op changelog.Op, typeID uint32, rec, old []byte) (full bool, err error) {
	// Batches are mostly of one type: the last type looked up saves a
	// map lookup per change.
	wt := w.lastType
	if wt == nil || wt.ID != typeID {
		wt = w.types[typeID]
		w.lastType = wt
	}
	if wt == nil {
		return false, nil
	}
	om := changeFlags{expired: op == changelog.Expire}
	if om.expired {
		op = changelog.Remove // the reaper's: a remove marked expired
	}
	match := rec
	if op == changelog.Remove {
		match = old
	}
	if ok, err := wt.Filter.Match(match); err != nil {
		return false, &apierror.Error{Code: apierror.Internal, Msg: "changed record of " + wt.Name + " unreadable: " + err.Error(), Err: err}
	} else if !ok {
		return false, nil
	}
	withRec, withOld := op != changelog.Remove, w.old && op != changelog.Insert
	cost := len(match) // the key, taken from it, is no longer
	if withRec {
		cost += len(rec)
	}
	if withOld {
		cost += len(old)
	}
	if w.resp.len()+cost+len(wt.Name)+3*len(wt.URLField)+changeSlack > w.room {
		// Rare: a change near the largest message sent.
		if withRec, withOld, om, err = w.fit(c, index, wt, match, rec, old, withRec, withOld, om); err != nil {
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
	if err := w.h.Cover(ctx, int64(w.size+cost), w.resp.n == 0); err != nil {
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
	return w.resp.n >= w.batchSize || w.size >= w.maxBytes, nil
}

// changeSlack bounds a change's bytes besides its key, records, type
// name and type URLs: tags, lengths, op, position, flags (about 80 at
// most).
const changeSlack = 128

// room is the most bytes one watch response may hold: what the transport
// sends in one message (Options.MaxSendBytes), and no more than the
// whole result budget, less the progress.
func (s *Service) room(opts engine.Options) int {
	return int(min(int64(s.opts.MaxSendBytes), opts.MaxResultBufferBytes)) - wire.MaxPositionField
}

// fit decides which records of a change near the message limit it sends:
// the old record goes when the change would not fit one message with it,
// the record too when the change would not fit with it either (what is
// left, the key, is within the transport's limit: it is cut from a record
// that arrived in one message). The response being built is sent first when the change fits
// a message but not beside it.
func (w *watch) fit(c uint64, index uint32, wt *watchType, match, rec, old []byte, withRec, withOld bool, om changeFlags) (bool, bool, changeFlags, error) {
	room := w.room
	w.resp.key = appendKeyFields(w.resp.key[:0], match, wt.KeyFields)
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
	if err := w.h.Reserve(ctx); err != nil {
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
		if err := w.h.Cover(ctx, int64(w.size+ch.cost), w.resp.n == 0); err != nil {
			return sent, err
		}
		w.resp.appendRaw(se.b[start:ch.end])
		start = ch.end
		w.size += ch.cost
		if w.resp.n >= w.batchSize || w.size >= w.maxBytes {
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
	w.stats.WatchChanges.Add(uint64(w.resp.n))
	err := w.send(w.resp.take(w.pos), w.h.Take(w.size))
	if w.obs != nil && w.at != 0 {
		w.obs.WatchSent(time.Duration(time.Now().UnixNano() - w.at))
	}
	w.size = 0
	w.release()
	w.lastSent, w.sentAny = w.pos, true
	return err
}

// progress sends a progress-only message.
func (w *watch) progress() error {
	w.lastSent, w.sentAny = w.pos, true
	bp := grpcbuf.Pool.Get(wire.MaxPositionField)
	*bp = appendProgress((*bp)[:0], w.pos)
	return w.send(bp, engine.Hold{})
}

// release gives back the result budget an unsent response holds (and
// the buffer of one never finished).
func (w *watch) release() {
	w.resp.release()
	w.h.Release()
}
