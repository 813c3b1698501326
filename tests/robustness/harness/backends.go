package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

// Backend is a storage backend the tests run against: Config returns the
// base Config of a fresh store (servers started from it again find the
// same data), and Check runs the index checker on that store while no
// server writes it.
type Backend struct {
	Name   string
	Config func(t testing.TB) server.Config
	Check  func(t *testing.T, cfg server.Config) (*server.CheckReport, error)
}

// Backends is the table: Pebble in a temporary directory, etcd on a
// single embedded member in one (each store under its own key prefix),
// and etcd as a real cluster of three member processes (skipped by
// -short).
var Backends = []Backend{
	{
		Name:   "pebble",
		Config: func(t testing.TB) server.Config { return server.Config{DataDir: t.TempDir()} },
		Check: func(t *testing.T, cfg server.Config) (*server.CheckReport, error) {
			return server.Check(t.Context(), cfg.DataDir)
		},
	},
	{
		Name: "etcd",
		Config: func(t testing.TB) server.Config {
			return server.Config{DataDir: t.TempDir(), Store: server.StoreEtcd, Etcd: server.EtcdConfig{
				Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)},
				Prefix:    "/" + strings.ReplaceAll(t.Name(), "/", "_") + "/",
			}}
		},
		Check: func(t *testing.T, cfg server.Config) (*server.CheckReport, error) {
			return server.CheckEtcd(t.Context(), cfg.Etcd)
		},
	},
	{
		Name: "etcd3",
		Config: func(t testing.TB) server.Config {
			return server.Config{DataDir: t.TempDir(), Store: server.StoreEtcd, Etcd: server.EtcdConfig{
				Endpoints: StartEtcd3(t),
				Prefix:    "/" + strings.ReplaceAll(t.Name(), "/", "_") + "/",
			}}
		},
		Check: func(t *testing.T, cfg server.Config) (*server.CheckReport, error) {
			return server.CheckEtcd(t.Context(), cfg.Etcd)
		},
	},
}

// StartEtcd3 starts three etcd member processes on loopback, with room for
// the tests' batches in one transaction, and kills them when t ends.
func StartEtcd3(t testing.TB) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd cluster of processes")
	}
	bin, err := cluster.CachedEtcd()
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

// MustCheck fails the test unless the backend's checker finds the store
// consistent.
func (b Backend) MustCheck(t *testing.T, cfg server.Config, when string) {
	t.Helper()
	report, err := b.Check(t, cfg)
	if err != nil {
		t.Fatalf("check %s: %v", when, err)
	}
	MustBeConsistent(t, report, when)
}

// MustBeConsistent fails the test unless report found no problem.
func MustBeConsistent(t *testing.T, report *server.CheckReport, when string) {
	t.Helper()
	if !report.OK() {
		var out strings.Builder
		_, _ = report.WriteTo(&out)
		t.Fatalf("check %s: the indexes disagree with the records:\n%s", when, out.String())
	}
}

// CheckMemFS is server.Check of the data directory dataDir on fs, in
// memory.
func CheckMemFS(ctx context.Context, fs *pebble.MemFS, dataDir string) (*server.CheckReport, error) {
	st, err := pebble.Open(pebble.Options{Dir: dataDir, Layout: keyspace.Layout{}, FS: fs, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dataDir, err)
	}
	report, err := engine.Check(ctx, st)
	if cerr := st.Close(); err == nil && cerr != nil {
		return nil, fmt.Errorf("check %s: close store: %w", dataDir, cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dataDir, err)
	}
	return report, nil
}
