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
func (s *Store) Lock(ctx context.Context, key []byte) (func(), error) {
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(lockTTL), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("etcd store: lock session: %w", mapErr(err))
	}
	m := concurrency.NewMutex(sess, s.Key(key))
	if err := m.Lock(ctx); err != nil {
		sess.Close()
		return nil, fmt.Errorf("etcd store: lock %q: %w", key, mapErr(err))
	}
	return func() {
		ctx, cancel := s.request()
		defer cancel()
		_ = m.Unlock(ctx)
		_ = sess.Close()
	}, nil
}
