package server_test

import (
	"strings"
	"testing"

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

// backends is the table: Pebble in a temporary directory, and etcd on a
// single embedded member in one (each store under its own key prefix).
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
