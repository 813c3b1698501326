package server_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
)

// backend is a storage backend the behaviour tests run against: config
// returns the base Config of a fresh store (servers started from it again
// find the same data), and check runs the index checker on that store
// while no server writes it.
type backend struct {
	name   string
	config func(t testing.TB) server.Config
	check  func(t *testing.T, cfg server.Config) (*server.CheckReport, error)
}

// backends is the table: Pebble in a temporary directory, etcd on a
// single embedded member in one (each store under its own key prefix), and
// etcd as a real cluster of three member processes (skipped by -short).
var backends = []backend{
	{
		name:   "pebble",
		config: func(t testing.TB) server.Config { return server.Config{DataDir: t.TempDir()} },
		check: func(t *testing.T, cfg server.Config) (*server.CheckReport, error) {
			return server.Check(t.Context(), cfg.DataDir)
		},
	},
	{
		name: "etcd",
		config: func(t testing.TB) server.Config {
			return server.Config{DataDir: t.TempDir(), Store: server.StoreEtcd, Etcd: server.EtcdConfig{
				Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)},
				Prefix:    "/" + strings.ReplaceAll(t.Name(), "/", "_") + "/",
			}}
		},
		check: func(t *testing.T, cfg server.Config) (*server.CheckReport, error) {
			return server.CheckEtcd(t.Context(), cfg.Etcd)
		},
	},
	{
		name: "etcd3",
		config: func(t testing.TB) server.Config {
			return server.Config{DataDir: t.TempDir(), Store: server.StoreEtcd, Etcd: server.EtcdConfig{
				Endpoints: startEtcd3(t),
				Prefix:    "/" + strings.ReplaceAll(t.Name(), "/", "_") + "/",
			}}
		},
		check: func(t *testing.T, cfg server.Config) (*server.CheckReport, error) {
			return server.CheckEtcd(t.Context(), cfg.Etcd)
		},
	},
}

// etcdBin builds the etcd member program once per test binary, into the
// tests' program cache (cluster.BinCache).
var etcdBin = sync.OnceValues(func() (string, error) {
	dir, err := cluster.BinCache(context.Background())
	if err != nil {
		return "", err
	}
	return cluster.BuildEtcd(context.Background(), dir)
})

// startEtcd3 starts three etcd member processes on loopback, with room for
// the tests' batches in one transaction, and kills them when t ends.
func startEtcd3(t testing.TB) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd cluster of processes")
	}
	bin, err := etcdBin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*cluster.StartTimeout)
	defer cancel()
	c, err := cluster.StartEtcd(ctx, bin, t.TempDir(), cluster.EtcdOptions{Args: []string{
		"--max-txn-ops", strconv.FormatUint(uint64(etcdtest.Roomy.MaxTxnOps), 10),
		"--max-request-bytes", strconv.FormatUint(uint64(etcdtest.Roomy.MaxRequestBytes), 10)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	return c.Endpoints()
}

// mustCheck fails the test unless the backend's checker finds the store
// consistent.
func (b backend) mustCheck(t *testing.T, cfg server.Config, when string) {
	t.Helper()
	report, err := b.check(t, cfg)
	if err != nil {
		t.Fatalf("check %s: %v", when, err)
	}
	if !report.OK() {
		var out strings.Builder
		_, _ = report.WriteTo(&out)
		t.Fatalf("check %s: the indexes disagree with the records:\n%s", when, out.String())
	}
}
