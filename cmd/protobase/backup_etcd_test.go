package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// A server on etcd refuses `protobase backup` (the store is the cluster's,
// shared by every server) and says what to use instead; the logical
// backup it names, an export, restores into a new database on the same
// cluster: the restored database exports the same bytes and the checker
// finds it consistent.
func TestBackupOnEtcd(t *testing.T) {
	endpoint := etcdtest.Start(t, etcdtest.Roomy)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	src, done := startServe(t, ctx, "--data", t.TempDir(), "--store", "etcd", "--etcd-endpoints", endpoint, "--etcd-prefix", "/live/")
	defer func() { cancel(); <-done }()
	mustCLI(t, "", "--addr", src, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", shopProto))
	mustCLI(t, `{"id": 1, "email": "a@x"}`+"\n"+`{"id": 2, "name": "Bo", "email": "b@x"}`+"\n", "--addr", src, "insert", "--type", "shop.User")

	r := cli(t, "", "--addr", src, "backup", "--to", filepath.Join(t.TempDir(), "bk"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "Unimplemented", "etcdctl snapshot save", "protobase export")

	dir := t.TempDir()
	from := filepath.Join(dir, "live.pbexport")
	mustCLI(t, "", "--addr", src, "export", "--to", from)
	dst, done2 := startServe(t, ctx, "--data", t.TempDir(), "--store", "etcd", "--etcd-endpoints", endpoint, "--etcd-prefix", "/restored/")
	defer func() { cancel(); <-done2 }()
	wantContains(t, mustCLI(t, "", "--addr", dst, "import", from).stdout, "imported 2 records")
	to := filepath.Join(dir, "restored.pbexport")
	mustCLI(t, "", "--addr", dst, "export", "--to", to)
	a, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(to)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("the restored database's export (%d bytes) differs from the backup (%d bytes)", len(b), len(a))
	}
	wantContains(t, mustCLI(t, "", "check", "--store", "etcd", "--etcd-endpoints", endpoint, "--etcd-prefix", "/restored/").stdout,
		"2 records, 2 index entries", ": consistent")
}
