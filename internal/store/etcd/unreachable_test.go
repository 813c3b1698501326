package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
)

// The contract's errors for a cluster that does not answer: with its one
// member paused (SIGSTOP), reads are store.ErrUnavailable and a commit,
// which was sent, store.ErrOutcomeUnknown; with the member killed
// (connection refused) a commit never leaves this process and is
// store.ErrUnavailable too. Each error names the request timeout or the
// refusal, and none of them is taken for the other.
func TestUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member process")
	}
	bin, err := cluster.CachedEtcd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*cluster.StartTimeout)
	defer cancel()
	c, err := cluster.StartEtcd(ctx, bin, t.TempDir(), cluster.EtcdOptions{Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	s, err := etcd.Open(etcd.Options{Endpoints: c.Endpoints(), Prefix: "/unreachable/", RequestTimeout: 500 * time.Millisecond,
		RetryTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func() error {
		b := s.NewWriteBatch()
		defer b.Close()
		b.Set([]byte("k"), []byte("v"))
		return s.ApplyBatch(b)
	}
	want := func(what string, err, target error) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("%s: %v, want %v", what, err, target)
		}
		t.Logf("%s: %v", what, err)
		for _, other := range []error{store.ErrUnavailable, store.ErrOutcomeUnknown} {
			if !errors.Is(other, target) && errors.Is(err, other) {
				t.Fatalf("%s: %v is also %v", what, err, other)
			}
		}
	}

	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Get([]byte("k"), nil)
	want("get, paused", err, store.ErrUnavailable)
	_, err = s.OpenSnapshot()
	want("snapshot, paused", err, store.ErrUnavailable)
	it, _ := s.NewIterator(nil, nil)
	it.First()
	want("iterate, paused", it.Error(), store.ErrUnavailable)
	it.Close()
	want("commit, paused", write(), store.ErrOutcomeUnknown)
	if err := c.Resume(0); err != nil {
		t.Fatal(err)
	}

	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Get([]byte("k"), nil)
	want("get, killed", err, store.ErrUnavailable)
	want("commit, killed", write(), store.ErrUnavailable)
}
