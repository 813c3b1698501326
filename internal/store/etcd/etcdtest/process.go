package etcdtest

import (
	"context"
	"strconv"
	"testing"

	"github.com/protobase/protobase/internal/cluster"
)

// Under the race detector a member in the test process is instrumented
// too and runs several times slower, the larger part of what a race run of
// the etcd tests costs, while the detector is there to check Protobase's
// code and etcd's client in the test process. So a race run
// starts its members as processes of their own (cmd/protobase-etcd, the
// same etcd server, built without the detector; cluster.CachedEtcd).

// startProcess is Start with the member in a process of its own.
func startProcess(t testing.TB, lim Limits) string {
	t.Helper()
	var args []string
	if lim.MaxTxnOps > 0 {
		args = append(args, "--max-txn-ops", strconv.FormatUint(uint64(lim.MaxTxnOps), 10))
	}
	if lim.MaxRequestBytes > 0 {
		args = append(args, "--max-request-bytes", strconv.FormatUint(uint64(lim.MaxRequestBytes), 10))
	}
	bin, err := cluster.CachedEtcd()
	if err != nil {
		t.Fatalf("build the etcd member: %v", err)
	}
	c, err := cluster.StartEtcd(context.Background(), bin, t.TempDir(), cluster.EtcdOptions{Members: 1, Args: args})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(c.KillAll)
	return c.Endpoints()[0]
}
