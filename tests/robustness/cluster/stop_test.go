package cluster_test

import (
	"testing"
	"time"
)

// A member that lost its quorum, with a client watching it (as every
// Protobase server on etcd does), exits within a few seconds of SIGTERM:
// etcd's own close waited for the watch up to its request timeout.
func TestEtcdMemberStopsWithoutQuorum(t *testing.T) {
	c := startEtcd(t)
	cli := newClient(t, c.Endpoints()[2:])
	if _, err := cli.Put(t.Context(), "/k", "v"); err != nil {
		t.Fatal(err)
	}
	watch := cli.Watch(t.Context(), "/k")
	_ = watch
	for _, i := range []int{0, 1} {
		if err := c.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := c.Stop(); err != nil { // SIGTERM to the member left
		t.Fatal(err)
	}
	// The bound a supervisor (and make cluster) allows a member; the
	// member gives its close 3 s.
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the member took %v to exit after SIGTERM, want at most 5s", took.Round(time.Millisecond))
	}
}
