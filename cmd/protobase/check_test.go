package main

import (
	"context"
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	applyShop(t, srv.Addr())
	mustCLI(t, `{"id": 1, "name": "Ann", "email": "ann@example.com"}
{"id": 2, "name": "Bob", "email": "bob@example.com"}
`, "--addr", srv.Addr(), "insert", "--type", "shop.User")

	// A running server holds the directory: check refuses, exit 1.
	r := cli(t, "", "check", "--data", dir)
	wantCode(t, r, exitFailed)
	wantContains(t, r.stderr, "is a server using the data directory")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	r = mustCLI(t, "", "check", "--data", dir)
	wantContains(t, r.stdout, "1 types, 1 indexes, 2 records, 2 index entries: consistent")

	// Lose one index entry (entries live under the tag byte 0x02, see
	// docs/design.md): check names it and exits 1.
	st, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	it, err := st.NewIter([]byte{0x02}, []byte{0x03})
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() {
		t.Fatal("no index entry stored")
	}
	b := st.NewBatch()
	b.Delete(it.Key())
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "", "check", "--data", dir)
	wantCode(t, r, exitFailed)
	wantContains(t, r.stdout, "missing-entry shop.User index ", "INCONSISTENT: 1 problems")
	wantContains(t, r.stderr, "the data directory is inconsistent")

	wantCode(t, cli(t, "", "check", "--data", ""), exitUsage)
	wantCode(t, cli(t, "", "check", "extra"), exitUsage)
	r = mustCLI(t, "", "check", "--help")
	wantContains(t, r.stdout, "protobase check --data DIR", "read-only", "Exit status")
}

// check --store etcd reads a store on etcd while its server runs; its flags
// are refused with a usage error when they do not go together.
func TestCheckCommandEtcd(t *testing.T) {
	endpoint := etcdtest.Start(t, etcdtest.Roomy)
	srv, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0",
		Store: server.StoreEtcd, Etcd: server.EtcdConfig{Endpoints: []string{endpoint}, Prefix: "/check/"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	applyShop(t, srv.Addr())
	mustCLI(t, `{"id": 1, "name": "Ann", "email": "ann@example.com"}
`, "--addr", srv.Addr(), "insert", "--type", "shop.User")
	r := mustCLI(t, "", "check", "--store", "etcd", "--etcd-endpoints", endpoint, "--etcd-prefix", "/check/")
	wantContains(t, r.stdout, "1 records, 1 index entries: consistent")

	for _, args := range [][]string{
		{"check", "--store", "etcd"}, // no endpoints
		{"check", "--store", "etcd", "--etcd-endpoints", endpoint, "--data", "x"}, // --data with etcd
		{"check", "--etcd-endpoints", endpoint},                                   // etcd flags without --store etcd
		{"check", "--store", "mysql"},
		{"check", "--store", "etcd", "--etcd-endpoints", "not a host"},
	} {
		wantCode(t, cli(t, "", args...), exitUsage)
	}
}
