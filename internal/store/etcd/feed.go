package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/protobase/protobase/internal/store"
)

// The store's change feed (store.Feed) is etcd's own watch: a revision of
// the feed is an etcd revision, the number WriteBatch.Position returns for
// the transaction that made it, and the feed keeps what etcd's history
// keeps (until the cluster compacts it).
//
// One revision, one call. etcd never cuts a revision across two watch
// responses: a watcher that is caught up gets one response per committed
// transaction (watchableStore.notify refuses to send more or less), and
// one catching up gets responses that each end on a revision boundary
// (eventBatch stops before the first event of a revision beyond its
// 1,000th, never inside one). The server cuts a response in parts only
// when the watch asks for fragments, which Changes does not, and the
// client hands each response to its channel whole. So the events of one
// response, grouped by ModRevision, are whole revisions, in the order of
// their sub-revisions: the order of the transaction's operations, which is
// the order the batch wrote them.
//
// Progress. A feed with nothing to deliver still learns how far the
// cluster has got: its watch asks for etcd's periodic progress
// notifications (--watch-progress-notify-interval, 10 minutes by default),
// and a feed that has received nothing for feedProgressEvery asks for one
// (at most one request per store per feedProgressEvery: a request is
// answered on every watch sharing the connection, and only once all of
// them have been sent everything). A notification is fn(rev, nil), the
// contract's progress mark, and moves the revision a resume starts from:
// so a watcher with a narrow filter can resume without reading the log
// again, and a feed whose prefix sees no writes for hours does not resume
// from a revision the cluster has compacted since, and fail.
//
// Memory. etcd's client buffers, without bound, the responses of a watch
// its reader has not taken yet, and many watches share one gRPC stream, so
// flow control cannot slow the cluster down for one slow reader. Changes
// therefore reads the watch in a goroutine of its own into a buffer of
// feedBuffer responses; when a slow fn lets that buffer fill, it cancels
// the watch and, once fn has taken what the buffer holds, watches again
// from the revision after the last one delivered (etcd reads it back from
// its history). What Changes holds is at most feedBuffer+1 responses: one
// revision each while the watch keeps up, up to 1,000 revisions each while
// it catches up (etcd's batch for a watcher behind), a revision being at
// most one transaction, that is at most the cluster's --max-request-bytes
// of values (plus the previous values it replaced).

// feedBuffer is the number of watch responses Changes holds before it lets
// the watch go and reads the history back later instead.
const feedBuffer = 16

// feedProgressEvery is how long a feed waits without a response before it
// asks the cluster for a progress notification.
const feedProgressEvery = time.Second

// The delay before Changes watches again after the cluster ended a watch
// (leader lost, member down), doubling up to the maximum while no revision
// comes through; a watch given up for a slow reader resumes at once.
const (
	feedRetryMin = 50 * time.Millisecond
	feedRetryMax = 2 * time.Second
)

var _ store.Feed = (*Store)(nil)

// feedWatches counts the etcd watches Changes has opened, its resumes
// included; tests read it to know that a resume happened.
var feedWatches atomic.Int64

// errPrevLost ends a watch whose response lacks the previous value of an
// event: etcd reads it at the revision before the event's and leaves it
// out when that revision has been compacted meanwhile. Watching again from
// the same revision then fails with the compaction, which Changes reports.
var errPrevLost = errors.New("etcd store: a change arrived without its previous value")

// Revision returns the cluster's current revision, read linearizably: every
// batch acknowledged before the call is at or below it. It is attempted
// again, as every read, while the cluster does not answer (retry.go).
func (s *Store) Revision(ctx context.Context) (int64, error) {
	var resp *clientv3.GetResponse
	err := s.read(func(rctx context.Context) (err error) {
		rctx, cancel := context.WithCancel(rctx)
		defer context.AfterFunc(ctx, cancel)()
		resp, err = s.cli.Get(rctx, s.prefix, clientv3.WithCountOnly())
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("etcd store: read the current revision: %w", s.readErr(err))
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// Changes calls fn once per revision after `after` that changed a key under
// prefix, in revision order, with the keys stripped of the store's prefix,
// and with no events for a progress mark (see Progress above). It watches
// again, from the revision after the last one delivered, each
// time the cluster ends its watch for a reason other than compaction, so
// that fn sees every revision once. A start (or a resume) before the
// cluster's compaction is a *store.CompactedError whose Oldest is the
// compaction revision plus one: etcd keeps the state at its compaction
// revision but not the deletions that revision made.
func (s *Store) Changes(ctx context.Context, prefix []byte, after int64, fn func(rev int64, evs []store.Event) error) error {
	if after < 0 {
		return fmt.Errorf("etcd store: changes after revision %d: a revision is never negative", after)
	}
	f := &feed{s: s, key: s.Key(prefix), after: after, next: after + 1, fn: fn}
	retry := feedRetryMin
	for {
		delivered := f.next
		overflow, err := f.watch(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case s.ctx.Err() != nil:
			return errors.New("etcd store: changes: the store is closed")
		case !errors.Is(err, errResume):
			return err
		case overflow:
			continue
		}
		if f.next != delivered {
			retry = feedRetryMin
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-s.ctx.Done():
			t.Stop()
			return errors.New("etcd store: changes: the store is closed")
		case <-t.C:
		}
		retry = min(2*retry, feedRetryMax)
	}
}

// errResume marks the end of a watch that Changes takes up again.
var errResume = errors.New("etcd store: watch ended")

// feed is one Changes call. It is used by that call's goroutine only.
type feed struct {
	s     *Store
	key   string
	after int64 // the start: Changes gives revisions after it
	next  int64 // the first revision fn has not been given
	fn    func(rev int64, evs []store.Event) error
	evs   []store.Event // reused for every revision
}

// watch runs one etcd watch from f.next until the cluster ends it (errResume),
// fn fails (its error), the start is compacted (*store.CompactedError) or
// the reader falls feedBuffer responses behind (overflow).
func (f *feed) watch(ctx context.Context) (overflow bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// One revision early: etcd accepts a watch that starts at its
	// compaction revision, whose deletions it no longer has; one revision
	// before that it reports the compaction. The extra revision is skipped.
	start := max(f.next-1, 1)
	feedWatches.Add(1)
	wc := f.s.cli.Watch(wctx, f.key, clientv3.WithPrefix(), clientv3.WithRev(start), clientv3.WithPrevKV(),
		clientv3.WithProgressNotify())
	buf := make(chan clientv3.WatchResponse, feedBuffer)
	var full atomic.Bool
	go func() {
		defer close(buf)
		for resp := range wc {
			select {
			case buf <- resp:
			default:
				full.Store(true)
				cancel()
				for range wc { // the client closes wc once the cancel is through
				}
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range buf { // wait for the reader: no goroutine outlives the call
		}
	}()
	tick := time.NewTicker(feedProgressEvery)
	defer tick.Stop()
	heard := time.Now()
	for {
		var resp clientv3.WatchResponse
		select {
		case r, ok := <-buf:
			if !ok {
				return full.Load(), errResume
			}
			resp, heard = r, time.Now()
		case now := <-tick.C:
			if now.Sub(heard) >= feedProgressEvery {
				f.s.askProgress(wctx, now)
			}
			continue
		}
		if resp.CompactRevision != 0 {
			return false, &store.CompactedError{Oldest: resp.CompactRevision + 1}
		}
		if err := resp.Err(); err != nil {
			if permanent(err) {
				return false, fmt.Errorf("etcd store: watch %q: %w", f.key, mapErr(err))
			}
			return false, errResume
		}
		if resp.IsProgressNotify() {
			// Every change under the prefix up to the header's revision
			// has been sent. A mark may repeat the last revision given
			// (that is how a caller hears that nothing came since), never
			// go below it, and never name the start.
			if h := resp.Header.Revision; h > f.after && h >= f.next-1 {
				f.next = max(f.next, h+1)
				if err := f.fn(h, nil); err != nil {
					return false, err
				}
			}
			continue
		}
		if err := f.deliver(resp.Events); err != nil {
			if errors.Is(err, errPrevLost) {
				return false, errResume
			}
			return false, err
		}
	}
}

// askProgress asks the cluster for a progress notification on the watches
// of ctx's connection, unless a feed of the store asked less than
// feedProgressEvery ago. A failed request is only a notification less.
func (s *Store) askProgress(ctx context.Context, now time.Time) {
	last := s.progressAt.Load()
	if now.UnixNano()-last < int64(feedProgressEvery) || !s.progressAt.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	_ = s.cli.RequestProgress(ctx)
}

// permanent reports whether a watch error would come back on every retry
// (the credentials or the key are refused), so Changes returns it instead.
func permanent(err error) bool {
	if errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserEmpty) ||
		errors.Is(err, rpctypes.ErrInvalidAuthToken) || errors.Is(err, rpctypes.ErrAuthFailed) {
		return true
	}
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
		return true
	}
	return false
}

// deliver calls fn once per revision of events (in revision order, as etcd
// sends them), skipping revisions already given, and advances f.next.
func (f *feed) deliver(events []*clientv3.Event) error {
	for i := 0; i < len(events); {
		rev := events[i].Kv.ModRevision
		j := i
		for j < len(events) && events[j].Kv.ModRevision == rev {
			j++
		}
		if rev >= f.next {
			evs, err := f.convert(events[i:j])
			if err != nil {
				return err
			}
			if err := f.fn(rev, evs); err != nil {
				return err
			}
			f.next = rev + 1
		}
		i = j
	}
	return nil
}

// convert turns one revision's etcd events into the contract's. Value and
// Prev are nil only when the key is deleted or was absent: an empty value
// is an empty, non-nil slice. The store's commit markers (commit.go) are
// left out: a revision that wrote only those is a progress mark.
func (f *feed) convert(events []*clientv3.Event) ([]store.Event, error) {
	n := len(f.s.prefix)
	f.evs = f.evs[:0]
	for _, ev := range events {
		if isMarker(ev.Kv.Key[n:]) {
			continue
		}
		e := store.Event{Key: ev.Kv.Key[n:], Delete: ev.Type == mvccpb.DELETE}
		if !e.Delete {
			e.Value = nonNil(ev.Kv.Value)
		}
		// A delete always had a value, and so did a put that did not
		// create its key (its creation revision is older).
		existed := e.Delete || ev.Kv.CreateRevision != ev.Kv.ModRevision
		switch {
		case ev.PrevKv != nil:
			e.Prev = nonNil(ev.PrevKv.Value)
		case existed:
			return nil, errPrevLost
		}
		f.evs = append(f.evs, e)
	}
	return f.evs, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
