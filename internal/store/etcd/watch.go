package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Shared is true: every server on the cluster writes the same store.
func (s *Store) Shared() bool { return true }

// watchRetry is how long Watch waits before watching again after the
// cluster ended a watch (a member lost, a compaction passed it).
const watchRetry = time.Second

// Watch calls fn once per batch of watch events under prefix, once when
// the watch has begun, and once more each time it has to watch again
// (events may have been missed meanwhile, so fn must re-read what it cares
// about). The call when it begins covers what changed between the
// caller's own read and the start of the watch, which runs in the
// background: a key created on another server in that gap would
// otherwise stay unseen until the next change.
func (s *Store) Watch(ctx context.Context, prefix []byte, fn func()) {
	ctx = clientv3.WithRequireLeader(ctx)
	for ctx.Err() == nil {
		wc := s.cli.Watch(ctx, s.Key(prefix), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		for resp := range wc {
			if resp.Err() != nil {
				break
			}
			if resp.Created || len(resp.Events) > 0 {
				fn()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			return
		case <-time.After(watchRetry):
			fn()
		}
	}
}
