package engine

import (
	"context"
	"fmt"
	"math"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/changelog"
)

// ReplaySpan is what Replay applies of a change log.
type ReplaySpan struct {
	// From and To are the commits to replay, inclusive; From must follow
	// the engine's last commit.
	From, To uint64
	// Until, when not zero, stops the replay before the first entry
	// committed after it (unix ns, the log's time).
	Until int64
	// At, when set, is called with each entry's time before the entry is
	// applied (the latest time there is for an entry of the reaper's). The
	// caller's Options.Now follows it, so that expiries are judged as
	// they were when the entry was written: a record removed had not
	// expired then, a unique value held by an expired record was free,
	// and every record the reaper deleted had expired.
	At func(unixNano int64)
}

// Replayed is where a replay stopped.
type Replayed struct {
	// Position is the last commit applied (the engine's last commit
	// before the replay when none was), At its entry's time (0 then).
	Position uint64
	At       int64
	Entries  int
	Changes  int
}

// Replay applies the entries of src's commits in span, in order, each as
// one write batch through the write path, so that every index, unique
// index, aggregate and expiry index is maintained as the original batch
// maintained it. A batch commits at the position the original did, since
// every commit writes one entry: each applied entry must land at its own
// commit, and a replay that would not is an error. The schema is not in
// the log: the caller makes sure it did not change over the span.
func (e *Engine) Replay(ctx context.Context, src *changelog.Log, span ReplaySpan) (Replayed, error) {
	e.writeMu.Lock()
	last := e.writeMu.seq
	e.writeMu.Unlock()
	done := Replayed{Position: last}
	if span.From != last+1 {
		return done, fmt.Errorf("replay from commit %d: the store's last commit is %d", span.From, last)
	}
	if span.To < span.From {
		return done, nil
	}
	w := e.NewWriter()
	defer w.Close()
	// Each entry is one commit, so a write replaces an expired record in
	// place; the log holds the record's expiry as an entry of its own.
	w.replaceInPlace = true
	r := src.NewReader(nil)
	defer r.Close()
	r.Round(span.From, span.To)
	for r.More() {
		c, ent, err := r.Next()
		if err != nil {
			return done, fmt.Errorf("read the change log at commit %d: %w", done.Position+1, err)
		}
		if ent == nil {
			break
		}
		if span.Until != 0 && ent.Time() > span.Until {
			_, err := w.Sync()
			return done, err
		}
		if err := e.replayEntry(ctx, w, c, ent, span.At); err != nil {
			return done, err
		}
		done.Position, done.At, done.Entries = c, ent.Time(), done.Entries+1
		done.Changes = int(w.Records())
		if err := r.Done(); err != nil {
			return done, fmt.Errorf("read the change log at commit %d: %w", c, err)
		}
	}
	if err := r.Err(); err != nil {
		return done, fmt.Errorf("read the change log after commit %d: %w", done.Position, err)
	}
	if done.Position < span.To {
		return done, fmt.Errorf("the change log ends at commit %d, before commit %d: %w", done.Position, span.To, changelog.ErrGap)
	}
	_, err := w.Sync()
	return done, err
}

// replayEntry applies the entry of commit c on w, which must commit it at
// position c.
func (e *Engine) replayEntry(ctx context.Context, w *Writer, c uint64, ent *changelog.Entry, at func(int64)) error {
	b, err := e.replayBatch(ent)
	if err != nil {
		return fmt.Errorf("replay commit %d: %w", c, err)
	}
	if at != nil {
		if b.Op == opExpire {
			// The reaper deleted these records because they had expired;
			// the log's time may lag the clock it judged them by.
			at(math.MaxInt64)
		} else {
			at(ent.Time())
		}
	}
	if err := w.Apply(ctx, b); err != nil {
		return fmt.Errorf("replay commit %d: %w", c, err)
	}
	if p := w.Position(); p != c {
		return fmt.Errorf("replay commit %d: applied at position %d", c, p)
	}
	return nil
}

// replayBatch makes the write batch of one log entry: an upsert per
// insert or update, a remove per remove (the new record, or the old one
// for a remove: both hold the key), or the reaper's expiry of every
// record of an entry of expiries. An insert or update is an upsert
// because the entry's time is the log's clock, which keeps its pace when
// the wall clock jumps: a record the original batch found expired (and
// replaced, an insert) or live (an update) may read otherwise at that
// time; the record written is the same.
func (e *Engine) replayBatch(ent *changelog.Entry) (Batch, error) {
	cat := e.cat.Load()
	var b Batch
	expire := false
	var c changelog.Change
	for {
		ok, err := ent.Next(&c)
		if err != nil {
			return Batch{}, err
		}
		if !ok {
			break
		}
		t := cat.byID[c.TypeID]
		if t == nil {
			return Batch{}, fmt.Errorf("change %d is of type id %d, which the schema does not hold", c.Index, c.TypeID)
		}
		rec, op := c.Rec, pb.WriteOp_WRITE_OP_UPSERT
		if c.Op == changelog.Remove || c.Op == changelog.Expire {
			rec, op = c.Old, pb.WriteOp_WRITE_OP_REMOVE
		}
		if (c.Op == changelog.Expire) != expire && len(b.Records) > 0 {
			return Batch{}, fmt.Errorf("change %d: an entry mixes expiries with other changes", c.Index)
		}
		expire = c.Op == changelog.Expire
		// The change's bytes are the entry's, valid until the next change.
		b.Records = append(b.Records, &anypb.Any{TypeUrl: t.url, Value: append([]byte(nil), rec...)})
		b.Ops = append(b.Ops, op)
	}
	if expire {
		b.Op, b.Ops = opExpire, nil
	}
	return b, nil
}
