package watch

import (
	"context"
	"errors"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/engine"
)

// round reads the log after the position up to wm, from the tail when it
// holds the next commit, else on one storage iterator, and sends what
// matches, for at most roundResponses responses.
func (w *watch) round(ctx context.Context, wm uint64) error {
	w.ctx = ctx
	rd := w.rd
	rd.Round(w.pos.next(), wm)
	defer rd.End()
	sent := 0
	for sent < roundResponses && rd.More() {
		if err := w.alive(ctx); err != nil {
			return err
		}
		c, le, err := rd.Next()
		if err != nil {
			return w.readError(err, wm)
		}
		if le == nil {
			break
		}
		n, err := w.entry(ctx, c, le)
		if err != nil {
			return err
		}
		if err := rd.Done(); err != nil {
			return w.corrupt(c, err)
		}
		sent += n
		w.pos = position{commit: c}
	}
	if err := rd.Err(); err != nil {
		return w.readError(err, wm)
	}
	return w.flush()
}

// readError maps an error of the log's reader: an entry that does not
// read is INTERNAL, a commit the log no longer holds OUT_OF_RANGE (the
// retention trimmed it meanwhile), and the store's errors their codes.
func (w *watch) readError(err error, wm uint64) error {
	var ee *changelog.EntryError
	switch {
	case errors.As(err, &ee):
		return w.corrupt(ee.Commit, ee.Err)
	case errors.Is(err, changelog.ErrGap):
		return w.logGap(wm)
	}
	return engine.StoreError(err)
}

func (w *watch) corrupt(c uint64, err error) error {
	return &apierror.Error{Code: apierror.Internal, Msg: "change log entry of commit " + u64(c) + ": " + err.Error(), Err: err}
}

// coverCarry is the reader's hook that covers a large change read across
// parts of an entry (reserveCarry): the response built so far is sent
// first, with the position before the change, and the wait holds
// nothing; the change is covered twice, as read and as copied into the
// response, no more than the whole budget.
func (w *watch) coverCarry(n int) error {
	if err := w.flush(); err != nil {
		return err
	}
	need := min(2*int64(n)+engine.MinHeld, w.budget)
	return w.h.Cover(w.ctx, need, true)
}

// entry considers the changes of commit c after the position and returns
// how many responses it sent.
func (w *watch) entry(ctx context.Context, c uint64, le *changelog.Entry) (int, error) {
	w.at = le.Time()
	whole := !w.pos.part || w.pos.commit != c
	if whole && w.shareKey != "" {
		se, fill := w.s.share.get(w.shareKey, c)
		if se != nil {
			return w.replay(ctx, c, se)
		}
		if fill && le.Size() <= shareBytes/4 { // a larger one is not kept (shareCache.put)
			// Sized from the entry at once: grown by append, the copies
			// were a tenth of the CPU with ten watchers.
			w.fill = &sharedEntry{b: make([]byte, 0, 3*le.Size()+1024), chs: make([]sharedChange, 0, 64)}
			defer func() { w.fill = nil }()
		}
	}
	sent := 0
	var ch changelog.Change
	for {
		ok, err := le.Next(&ch)
		if err != nil {
			return sent, w.corrupt(c, err)
		}
		if !ok {
			if w.fill != nil {
				w.s.share.put(w.shareKey, c, w.fill)
			}
			return sent, nil
		}
		if w.pos.part && c == w.pos.commit && ch.Index <= w.pos.index {
			continue
		}
		w.pos = position{commit: c, index: ch.Index, part: true}
		full, err := w.consider(ctx, c, ch.Index, ch.Op, ch.TypeID, ch.Rec, ch.Old)
		if err != nil {
			return sent, err
		}
		if le.Parted() {
			// A large change's carry goes, and so does the budget it
			// held unless the response holds the change now.
			le.Shrink()
			if !w.resp.open() {
				w.h.Release()
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
