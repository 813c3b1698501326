package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// A watcher that read the state before its watch began learns of a change
// made in the gap: Watch calls fn once when it has begun, with no change
// after it, so fn re-reads.
func TestWatchCallsOnceItBegins(t *testing.T) {
	s := open(t, etcdtest.Start(t, etcdtest.Roomy))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	called := make(chan struct{}, 1)
	go s.Watch(ctx, []byte("k/"), func() {
		select {
		case called <- struct{}{}:
		default:
		}
	})
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not call fn once it began (a change made before it started would stay unseen)")
	}
}
