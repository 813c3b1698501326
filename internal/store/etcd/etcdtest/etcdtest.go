// Package etcdtest starts real etcd members for the tests of the etcd
// store and of servers running on it: inside the test process, from etcd's
// own server module (embed), or under the race detector as processes of
// their own (process.go).
package etcdtest

import (
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/protobase/protobase/internal/freeport"
)

// Limits are the member's transaction limits; zero fields keep etcd's
// defaults (128 operations, 1.5 MiB).
type Limits struct {
	MaxTxnOps       uint
	MaxRequestBytes uint
}

// Roomy is what the tests' members allow unless a test asks otherwise:
// write batches of a few thousand records fit in one transaction.
var Roomy = Limits{MaxTxnOps: 1 << 16, MaxRequestBytes: 64 << 20}

// Start runs a single-member cluster with its data in t.TempDir() and
// returns its client endpoint. The member stops when the test ends.
func Start(t testing.TB, lim Limits) string {
	t.Helper()
	if raceEnabled {
		return startProcess(t, lim)
	}
	cfg := embed.NewConfig()
	cfg.Name = "member"
	cfg.Dir = t.TempDir()
	// Quiet: a member logs errors while it shuts down at the test's end.
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	client, peer := FreeURL(t), FreeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	if lim.MaxTxnOps > 0 {
		cfg.MaxTxnOps = lim.MaxTxnOps
	}
	if lim.MaxRequestBytes > 0 {
		cfg.MaxRequestBytes = lim.MaxRequestBytes
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("etcd member not ready after 30s")
	}
	return client.Host
}

// FreeURL returns a loopback URL on a port free a moment ago, below the
// kernel's ephemeral range (internal/freeport): an etcd member needs its
// peer URL before it listens.
func FreeURL(t testing.TB) url.URL {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	return url.URL{Scheme: "http", Host: addr}
}
