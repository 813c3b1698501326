package store_test

import (
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/internal/store/storetest"
)

// Backends is the table of storage contract implementations every
// conformance test runs against.
func backends(parent *testing.T) []storetest.Backend {
	parent.Helper()
	var endpoint string // one etcd member for the whole run, each test under its own prefix
	openPebble := func(asyncIndexBytes int) func(t *testing.T) store.KV {
		return func(t *testing.T) store.KV {
			s, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}, Sync: true,
				CacheBytes: 8 << 20, MemTableBytes: 4 << 20, AsyncIndexBytes: asyncIndexBytes})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}
	return []storetest.Backend{
		{Name: "pebble", Open: openPebble(0)},
		// Every batch's index writes held back and applied with those of
		// the batches after it, as large batches' are.
		{Name: "pebble-async-index", Open: openPebble(1)},
		{Name: "etcd", SharedWriters: true, Open: func(t *testing.T) store.KV {
			if endpoint == "" {
				endpoint = etcdtest.Start(parent, etcdtest.Roomy)
			}
			s, err := etcd.Open(etcd.Options{Endpoints: []string{endpoint}, Prefix: "/" + t.Name() + "/", PageSize: 7})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
}

func TestConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) { storetest.Run(t, b) })
	}
}
