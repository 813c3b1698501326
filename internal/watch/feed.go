package watch

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// Watch on a Shared store (etcd) reads the store's own feed: positions are
// the store's revisions (what write acknowledgements return there), the
// changes of a revision are its record-key events in the order the batch
// wrote them, and retention is the store's compaction.

var recordSpace = []byte{keyspace.TagRecord}

// runFeed serves the watch from feed, until ctx ends, the service stops
// its watches or the engine closes.
func (w *watch) runFeed(ctx context.Context, feed store.Feed) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.s.stop:
			cancel()
		case <-w.s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := w.serveFeed(ctx, feed)
	select {
	case <-w.s.stop:
		return errStopped
	default:
	}
	select {
	case <-w.s.done:
		return engine.ErrClosed
	default:
	}
	return err
}

func (w *watch) serveFeed(ctx context.Context, feed store.Feed) error {
	after, err := w.startFeed(ctx, feed)
	if err != nil {
		return err
	}
	if err := w.progress(); err != nil {
		return err
	}
	// The feed calls fn only for revisions that changed records; a
	// ticker sends the progress a filtered watcher needs when fn goes
	// quiet. mu serializes the two.
	var mu sync.Mutex
	var wg sync.WaitGroup
	tickDone := make(chan struct{})
	defer func() {
		close(tickDone)
		wg.Wait() // nothing sends once Watch has returned
	}()
	tickErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				mu.Lock()
				var err error
				if w.pos != w.lastSent {
					err = w.progress()
				}
				mu.Unlock()
				if err != nil {
					tickErr <- err
					return
				}
			case <-tickDone:
				return
			}
		}
	}()
	err = feed.Changes(ctx, recordSpace, after, func(rev int64, evs []store.Event) error {
		mu.Lock()
		defer mu.Unlock()
		select {
		case err := <-tickErr:
			return err
		default:
		}
		return w.revision(ctx, uint64(rev), evs)
	})
	var ce *store.CompactedError
	if errors.As(err, &ce) {
		return outOfRange("the store no longer keeps the revisions after position "+formatPos(w.pos)+" (compacted)", max(ce.Oldest-1, 0), -1)
	}
	return engine.StoreError(err)
}

// revision considers the record events of one revision of the feed. The
// deletions of a revision that rewrote the reaper's mark are expiries.
func (w *watch) revision(ctx context.Context, c uint64, evs []store.Event) error {
	reaped := false
	for _, ev := range evs {
		if string(ev.Key) == keyspace.ExpiryMarkKey {
			reaped = true
		}
	}
	for i, ev := range evs {
		idx := uint32(i)
		if w.pos.part && c == w.pos.commit && idx <= w.pos.index {
			continue
		}
		w.pos = position{commit: c, index: idx, part: true}
		if len(ev.Key) < keyspace.PrefixLen {
			continue
		}
		op := changelog.Update
		switch {
		case ev.Delete && reaped:
			op = changelog.Expire
		case ev.Delete:
			op = changelog.Remove
		case ev.Prev == nil:
			op = changelog.Insert
		}
		typeID := binary.BigEndian.Uint32(ev.Key[1:keyspace.PrefixLen])
		full, err := w.consider(ctx, c, idx, op, typeID, ev.Value, ev.Prev)
		if err != nil {
			return err
		}
		if full {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	w.pos = position{commit: c}
	return w.flush()
}

// startFeed sets the position the request's start names and returns the
// revision to read the feed after.
func (w *watch) startFeed(ctx context.Context, feed store.Feed) (int64, error) {
	cur, err := feed.Revision(ctx)
	if err != nil {
		return 0, engine.StoreError(err)
	}
	switch s := w.start.GetStart().(type) {
	case nil, *pb.WatchStart_Now:
		w.pos = position{commit: uint64(cur)}
		return cur, nil
	case *pb.WatchStart_Oldest:
		// Ask for everything: a store that compacted names its oldest
		// revision at once; one that did not either calls fn (its first
		// change) or waits for changes.
		probe, cancel := context.WithTimeout(ctx, oldestProbe)
		err := feed.Changes(probe, recordSpace, 0, func(int64, []store.Event) error { return errStopFeed })
		cancel()
		var ce *store.CompactedError
		switch {
		case errors.As(err, &ce):
			w.pos = position{commit: uint64(max(ce.Oldest-1, 0))}
		case err == nil, errors.Is(err, errStopFeed), ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			w.pos = position{}
		default:
			return 0, engine.StoreError(err)
		}
		return int64(w.pos.commit), nil
	case *pb.WatchStart_After:
		if err := w.startAfter(s.After); err != nil {
			return 0, err
		}
		if w.pos.commit > uint64(cur) {
			return 0, outOfRange("position "+formatPos(w.pos)+" is past the store's current revision "+u64(uint64(cur))+
				": it is not from this store's history", -1, cur)
		}
		if w.pos.part {
			return int64(w.pos.commit) - 1, nil
		}
		return int64(w.pos.commit), nil
	}
	return 0, &apierror.Error{Code: apierror.InvalidArgument, Msg: "unknown start", Field: "start"}
}

// oldestProbe bounds the wait for a store to say which revisions it
// still keeps.
const oldestProbe = 2 * time.Second

// errStopFeed ends a feed read early.
var errStopFeed = errors.New("watch: stop reading the feed")
