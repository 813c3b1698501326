package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/protobase/protobase/internal/cluster"
)

// startEtcd starts a three-member cluster under t.TempDir() and stops it
// when the test ends.
func startEtcd(t *testing.T) *cluster.Etcd {
	t.Helper()
	return startEtcdWith(t, cluster.EtcdOptions{})
}

// startEtcdWith starts a cluster shaped by opt, as startEtcd does.
func startEtcdWith(t *testing.T, opt cluster.EtcdOptions) *cluster.Etcd {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd cluster of processes")
	}
	bin, err := cluster.CachedEtcd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*cluster.StartTimeout)
	defer cancel()
	start := time.Now()
	c, err := cluster.StartEtcd(ctx, bin, t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("three members serve after %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(c.KillAll)
	return c
}

func newClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// leaderOf is the index of the member that leads the cluster.
func leaderOf(t *testing.T, c *cluster.Etcd) int {
	t.Helper()
	cli := newClient(t, c.Endpoints())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var lead uint64
	ids := make([]uint64, len(c.Endpoints()))
	for i, ep := range c.Endpoints() {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			t.Fatalf("status of %s: %v", c.Members()[i].Name, err)
		}
		ids[i], lead = st.Header.MemberId, st.Leader
	}
	for i, id := range ids {
		if id == lead {
			return i
		}
	}
	t.Fatalf("no member is the leader %x", lead)
	return -1
}

// batchKeys is how many keys each transaction of the kill test writes: a
// batch half visible would show as some of them present without the rest.
const batchKeys = 8

// ackWriter writes batches of batchKeys keys, one transaction each, until
// stopped, and records which batches the cluster acknowledged.
//
// Invariant: mu guards acked and next; progress is signalled (without
// blocking) after every acknowledgement.
type ackWriter struct {
	cli      *clientv3.Client
	mu       sync.Mutex
	acked    map[int]bool
	next     int
	failures int
	progress chan struct{}
}

func (w *ackWriter) run(ctx context.Context) {
	for ctx.Err() == nil {
		w.mu.Lock()
		b := w.next
		w.next++
		w.mu.Unlock()
		ops := make([]clientv3.Op, batchKeys)
		for k := range ops {
			ops[k] = clientv3.OpPut(fmt.Sprintf("/kill/%06d/%d", b, k), strconv.Itoa(b))
		}
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := w.cli.Txn(opCtx).Then(ops...).Commit()
		cancel()
		w.mu.Lock()
		if err == nil {
			w.acked[b] = true
		} else {
			w.failures++ // outcome unknown: neither required nor forbidden
		}
		w.mu.Unlock()
		if err == nil {
			select {
			case w.progress <- struct{}{}:
			default:
			}
		}
	}
}

// waitAcks blocks until n more batches are acknowledged, or fails the test
// after a bound.
func (w *ackWriter) waitAcks(t *testing.T, n int, what string) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	w.mu.Lock()
	want := len(w.acked) + n
	w.mu.Unlock()
	for {
		w.mu.Lock()
		got := len(w.acked)
		w.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-w.progress:
		case <-deadline.C:
			t.Fatalf("%s: %d of %d batches acknowledged after 60s", what, got, want)
		}
	}
}

// TestEtcdMemberKill kills the leader of a three-member cluster with SIGKILL
// while a client writes multi-key transactions: writes go on, and once the
// member is back every acknowledged batch is there, whole, on every member,
// and no batch is there in part.
func TestEtcdMemberKill(t *testing.T) {
	c := startEtcd(t)
	cli := newClient(t, c.Endpoints())
	w := &ackWriter{cli: cli, acked: map[int]bool{}, progress: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	defer func() { cancel(); <-done }()

	w.waitAcks(t, 50, "before the kill")
	victim := leaderOf(t, c)
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	w.waitAcks(t, 100, "with the leader killed")
	rctx, rcancel := context.WithTimeout(t.Context(), 2*cluster.StartTimeout)
	defer rcancel()
	if err := c.Restart(rctx, victim); err != nil {
		t.Fatal(err)
	}
	w.waitAcks(t, 50, "after the restart")
	cancel()
	<-done

	w.mu.Lock()
	t.Logf("%d batches acknowledged, %d failed (outcome unknown), %s killed and restarted",
		len(w.acked), w.failures, c.Members()[victim].Name)
	w.mu.Unlock()
	// Every member, the restarted one included, must hold the same state
	// once it has caught up: read each alone, linearizably (the read waits
	// for the member to apply up to the leader's commit index).
	for i, ep := range c.Endpoints() {
		one := newClient(t, []string{ep})
		checkBatches(t, one, w, c.Members()[i].Name)
	}
}

// checkBatches reads every key under /kill/ through cli and checks that each
// acknowledged batch is whole and no batch is partial.
func checkBatches(t *testing.T, cli *clientv3.Client, w *ackWriter, member string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/kill/", clientv3.WithPrefix())
	for errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		resp, err = cli.Get(ctx, "/kill/", clientv3.WithPrefix())
	}
	if err != nil {
		t.Fatalf("read from %s: %v", member, err)
	}
	present := map[int]int{}
	for _, kv := range resp.Kvs {
		b, err := strconv.Atoi(string(kv.Value))
		if err != nil {
			t.Fatalf("%s: key %s holds %q", member, kv.Key, kv.Value)
		}
		present[b]++
	}
	for b, n := range present {
		if n != batchKeys {
			t.Errorf("%s: batch %d half visible: %d of %d keys", member, b, n, batchKeys)
		}
	}
	for b := range w.acked {
		if present[b] != batchKeys {
			t.Errorf("%s: acknowledged batch %d lost (%d of %d keys)", member, b, present[b], batchKeys)
		}
	}
}
