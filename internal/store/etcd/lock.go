package etcd

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/protobase/protobase/internal/store"
)

var _ store.Locker = (*Store)(nil)

// lockTTL is the lease of a held lock, in seconds: a server that dies
// holding it frees it this long after, when its lease lapses.
const lockTTL = 10

// Lock takes the lock named key (etcd keys key "/" lease, through etcd's
// concurrency.Mutex) under a lease of its own that the client keeps alive.
// A failure because the cluster did not serve the request (a member or
// the leader lost) is attempted again, as any request (retry.go), for the
// retry timeout from the first failure: the wait for the lock itself is
// not bounded. An attempt given up drops its lease, and with it the lock
// if that attempt had taken it unseen (at the latest when the lease
// lapses).
func (s *Store) Lock(ctx context.Context, key []byte) (func(), error) {
	var r *retrier
	for {
		release, err := s.lockOnce(ctx, key)
		if err == nil || ctx.Err() != nil {
			return release, err
		}
		if r == nil {
			r = s.retrier()
		}
		if !r.again(err) {
			return nil, r.gaveUp(err)
		}
	}
}

func (s *Store) lockOnce(ctx context.Context, key []byte) (func(), error) {
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(lockTTL), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("etcd store: lock session: %w", s.readErr(err))
	}
	m := concurrency.NewMutex(sess, s.Key(key))
	if err := m.Lock(ctx); err != nil {
		sess.Close()
		return nil, fmt.Errorf("etcd store: lock %q: %w", key, s.readErr(err))
	}
	return func() {
		ctx, cancel := s.request()
		defer cancel()
		_ = m.Unlock(ctx)
		_ = sess.Close()
	}, nil
}
