package cluster_test

import (
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/cluster"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/storetest"
)

// roomyArgs let a transaction hold a few thousand records, as the
// single-member conformance run's members do (etcdtest.Roomy).
var roomyArgs = []string{"--max-txn-ops", "65536", "--max-request-bytes", "67108864"}

// TestConformance runs the storage contract's conformance suite against a
// real three-member cluster of processes: first whole, then with one member
// killed (a quorum remains, so the contract must hold unchanged). Each test
// has its own key prefix on the shared cluster.
func TestConformance(t *testing.T) {
	c := startEtcdWith(t, cluster.EtcdOptions{Args: roomyArgs})
	backend := func(name string) storetest.Backend {
		return storetest.Backend{Name: name, SharedWriters: true, Open: func(t *testing.T) store.KV {
			s, err := etcd.Open(etcd.Options{Endpoints: c.Endpoints(),
				Prefix: "/" + strings.ReplaceAll(t.Name(), "/", "_") + "/", PageSize: 7})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}}
	}
	t.Run("three members", func(t *testing.T) { storetest.Run(t, backend("etcd-3")) })
	if err := c.Kill(2); err != nil {
		t.Fatal(err)
	}
	t.Run("one member down", func(t *testing.T) { storetest.Run(t, backend("etcd-2-of-3")) })
}
