package watch

import (
	"strconv"

	"google.golang.org/protobuf/protoadapt"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
)

// position is where a watcher stands: every change up to it has been
// considered. part says the commit is considered up to change index only;
// else the whole commit is.
type position struct {
	commit uint64
	index  uint32
	part   bool
}

// next is the first commit after the position not wholly considered.
func (p position) next() uint64 {
	if p.part {
		return p.commit
	}
	return p.commit + 1
}

// startLog sets the position the request's start names, checking that the
// log holds what follows it; wm is the durable watermark.
func (w *watch) startLog(wm uint64) error {
	switch s := w.start.GetStart().(type) {
	case nil, *pb.WatchStart_Now:
		w.pos = position{commit: wm}
		return nil
	case *pb.WatchStart_Oldest:
		first, ok, err := w.firstCommit()
		if err != nil {
			return err
		}
		w.pos = position{commit: wm}
		if ok {
			w.pos.commit = first - 1
		}
		return nil
	case *pb.WatchStart_After:
		if err := w.startAfter(s.After); err != nil {
			return err
		}
		if w.pos.commit > wm {
			oldest, err := w.oldestPosition(wm)
			if err != nil {
				return err
			}
			return pastNewest(w.pos, wm, oldest)
		}
		return w.checkHeld(wm)
	}
	return &apierror.Error{Code: apierror.InvalidArgument, Msg: "unknown start", Field: "start"}
}

// startAfter sets the position a start after p names.
func (w *watch) startAfter(p *pb.Position) error {
	if p == nil {
		return &apierror.Error{Code: apierror.InvalidArgument, Msg: "start.after holds no position", Field: "start.after"}
	}
	w.pos = position{commit: p.GetCommit()}
	if p.Index != nil {
		if p.GetCommit() == 0 {
			return &apierror.Error{Code: apierror.InvalidArgument, Msg: "start.after has a change index but no commit", Field: "start.after.commit"}
		}
		w.pos.index, w.pos.part = p.GetIndex(), true
	}
	return nil
}

// checkHeld checks that the log holds the commit after the position (the
// position's own commit when only part of it is considered).
func (w *watch) checkHeld(wm uint64) error {
	from := w.pos.next()
	if from > wm {
		return nil
	}
	first, ok, err := w.firstCommit()
	if err != nil {
		return err
	}
	if ok && first <= from {
		return nil
	}
	return w.logGap(wm)
}

// firstCommit returns the oldest commit the log holds.
func (w *watch) firstCommit() (uint64, bool, error) {
	c, ok, err := w.log.First()
	return c, ok, engine.StoreError(err)
}

// logGap is the OUT_OF_RANGE of the position, whose next changes the log
// no longer holds (trimmed, or written while the log was off).
func (w *watch) logGap(wm uint64) error {
	oldest, err := w.oldestPosition(wm)
	if err != nil {
		return err
	}
	return outOfRange("the change log no longer holds the changes after position "+formatPos(w.pos)+
		" (trimmed by the retention, or written while the log was off)", oldest, int64(wm)) //nolint:gosec // commit sequences stay far below 2^63
}

// oldestPosition is the oldest position a watch can start after: the
// commit before the oldest the log holds, or wm when it holds none.
func (w *watch) oldestPosition(wm uint64) (int64, error) {
	first, ok, err := w.firstCommit()
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
func outOfRange(msg string, oldest, newest int64) error {
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
	return &apierror.Error{Code: apierror.OutOfRange, Msg: msg, Field: "start", Details: details}
}

// pastNewest is the OUT_OF_RANGE of a start past the newest durable commit
// wm. The way out is toward the newest position (or now), so the message
// leads with it; the Position detail stays the oldest, as for every
// OUT_OF_RANGE of a start.
func pastNewest(p position, wm uint64, oldest int64) error {
	msg := "position " + formatPos(p) + " is past the newest commit " + u64(wm) +
		": it is not from this database's history (a restored backup, or another server); start after commit " + u64(wm) +
		" (the newest position) or an earlier one still kept, or at now"
	var details []protoadapt.MessageV1
	if oldest >= 0 {
		msg += "; the oldest position available is commit " + i64(oldest)
		details = []protoadapt.MessageV1{protoadapt.MessageV1Of(&pb.Position{Commit: uint64(oldest)})}
	}
	return &apierror.Error{Code: apierror.OutOfRange, Msg: msg, Field: "start", Details: details}
}

func formatPos(p position) string {
	s := "{commit " + u64(p.commit)
	if p.part {
		s += ", index " + strconv.FormatUint(uint64(p.index), 10)
	}
	return s + "}"
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

func i64(n int64) string { return strconv.FormatInt(n, 10) }
