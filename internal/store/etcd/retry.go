package etcd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/protobase/protobase/internal/store"
)

// Losing a member is a pause, not an error. A request the cluster did not
// serve (store.ErrUnavailable: no connection, no leader, no answer) is
// sent again, with a growing pause between attempts, until it is served
// or the store's retry timeout (Options.RetryTimeout) has passed since its
// first attempt; only then does the caller see the error. etcd's client
// balances requests over the members round robin and leaves out those
// whose connection has failed, so each attempt after a member is lost goes
// to a member that answers, and after a leader is lost the attempts go on
// until the election is over.
//
// Reads change nothing, so a read is sent again whatever happened to it.
// A write batch whose commit was sent without an answer
// (store.ErrOutcomeUnknown) may have been applied, or may still be: it is
// sent again only under the commit marker (commit.go), which makes every
// attempt of one batch apply at most once and tells which one did.

// DefaultRetryTimeout is used when Options.RetryTimeout is zero: longer
// than an etcd election with its default settings (1 s election timeout),
// and than the few seconds a member takes to restart and catch up.
const DefaultRetryTimeout = 30 * time.Second

// The pause before the second attempt, doubling up to retryPauseMax; each
// pause is drawn in [p/2, p) so that the servers of a cluster do not all
// come back at one instant.
const (
	retryPauseMin = 25 * time.Millisecond
	retryPauseMax = 500 * time.Millisecond
)

// retryCounts are the store's retry figures (RetryStats).
type retryCounts struct {
	retries    atomic.Uint64
	applied    atomic.Uint64
	notApplied atomic.Uint64
}

// RetryStats are counts since Open: requests sent again after the cluster
// did not serve them, and commits whose outcome was unknown that the
// commit marker then settled as applied or as not applied.
type RetryStats struct {
	Retries                           uint64
	AmbiguousApplied, AmbiguousResent uint64
}

// RetryStats returns the store's retry counts, for the server's metrics.
func (s *Store) RetryStats() RetryStats {
	return RetryStats{Retries: s.retries.retries.Load(),
		AmbiguousApplied: s.retries.applied.Load(), AmbiguousResent: s.retries.notApplied.Load()}
}

// retrier paces the attempts of one request.
type retrier struct {
	s        *Store
	start    time.Time
	attempts int
}

func (s *Store) retrier() *retrier { return &retrier{s: s, start: time.Now()} }

// again reports whether err, the error of an attempt, is worth another,
// and if so waits before it; it is false past the retry timeout, when
// the store closes, and for errors that another attempt would not change.
func (r *retrier) again(err error) bool {
	if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrOutcomeUnknown) {
		return false
	}
	p := min(retryPauseMin<<min(r.attempts, 10), retryPauseMax)
	p = p/2 + rand.N(p/2) //nolint:gosec // spreads retries; no secret
	if r.s.retryTimeout < 0 || time.Since(r.start)+p > r.s.retryTimeout {
		return false
	}
	t := time.NewTimer(p)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.s.ctx.Done():
		return false
	}
	r.attempts++
	r.s.retries.retries.Add(1)
	return true
}

// gaveUp adds to err, the last attempt's, how long the attempts went on.
func (r *retrier) gaveUp(err error) error {
	if err == nil || r.attempts == 0 {
		return err
	}
	return fmt.Errorf("%w (after %d attempts over %v, the retry timeout being %v)",
		err, r.attempts+1, time.Since(r.start).Round(time.Millisecond), r.s.retryTimeout)
}

// read runs attempt, a read bounded by its own context, until it
// succeeds, fails for good, or the retry timeout passes.
func (s *Store) read(attempt func(ctx context.Context) error) error {
	r := s.retrier()
	for {
		ctx, cancel := s.request()
		err := attempt(ctx)
		cancel()
		if err == nil || !r.again(err) {
			return r.gaveUp(err)
		}
	}
}
