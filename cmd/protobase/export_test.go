package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// export and import end to end in both formats, resuming from a progress
// file, and the command lines and files they refuse.
func TestExportImportCommands(t *testing.T) {
	src := startServer(t).Addr()
	mustCLI(t, "", "--addr", src, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", shopProto))
	mustCLI(t, `{"id": 1, "email": "a@x"}`+"\n"+`{"id": 2, "email": "b@x"}`+"\n"+`{"id": 3, "email": "c@x"}`+"\n",
		"--addr", src, "insert", "--type", "shop.User")
	dir := t.TempDir()
	bin := filepath.Join(dir, "shop.pbexport")
	js := filepath.Join(dir, "shop.jsonl")
	wantContains(t, mustCLI(t, "", "--addr", src, "export", "--to", bin).stdout, "exported 3 records to "+bin+" (binary)")
	wantContains(t, mustCLI(t, "", "--addr", src, "export", "--type", "shop.User", "--to", js, "--format", "json").stdout, "exported 3 records")
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], `{"format":"protobase-export","version":1,"schema":`) ||
		lines[1] != `{"type":"shop.User","record":{"id":"1","email":"a@x"}}` || lines[4] != `{"end":{"records":3}}` {
		t.Fatalf("JSON export:\n%s", b)
	}

	for _, file := range []string{bin, js} {
		dst := startServer(t).Addr()
		wantContains(t, mustCLI(t, "", "--addr", dst, "import", file, "--batch", "2").stdout, "imported 3 records from "+file+" (0 skipped")
		wantContains(t, mustCLI(t, "", "--addr", dst, "scan", "--type", "shop.User").stdout, `"a@x"`, `"b@x"`, `"c@x"`)
		if _, err := os.Stat(file + ".import-progress"); !os.IsNotExist(err) {
			t.Fatalf("the progress file is left after a complete import: %v", err)
		}
	}

	// A progress file from an interrupted run: the records it counts are
	// skipped (this server never had them, so they stay missing).
	dst := startServer(t).Addr()
	progress := writeFile(t, t.TempDir(), "p", "2\n")
	wantContains(t, mustCLI(t, "", "--addr", dst, "import", bin, "--progress", progress).stdout, "imported 1 records", "(2 skipped")
	r := mustCLI(t, "", "--addr", dst, "scan", "--type", "shop.User")
	if strings.Contains(r.stdout, `"a@x"`) || !strings.Contains(r.stdout, `"c@x"`) {
		t.Fatalf("resumed import stored:\n%s", r.stdout)
	}

	// Refused command lines.
	wantCode(t, cli(t, "", "--addr", src, "export"), exitUsage)
	wantCode(t, cli(t, "", "--addr", src, "export", "--to", filepath.Join(dir, "x"), "--format", "xml"), exitUsage)
	wantCode(t, cli(t, "", "--addr", src, "import"), exitUsage)
	wantCode(t, cli(t, "", "--addr", src, "import", bin, "--batch", "0"), exitUsage)
	wantCode(t, cli(t, "", "--addr", src, "import", bin, "--bogus"), exitUsage)
	// Refused types and files.
	r = cli(t, "", "--addr", src, "export", "--type", "shop.Nope", "--to", filepath.Join(dir, "nope"))
	wantCode(t, r, exitFailed)
	wantContains(t, r.stderr, "shop.Nope")
	if _, err := os.Stat(filepath.Join(dir, "nope")); !os.IsNotExist(err) {
		t.Fatalf("a failed export left its file: %v", err)
	}
	r = cli(t, "", "--addr", src, "import", writeFile(t, dir, "garbage", "garbage\n"))
	wantCode(t, r, exitFailed)
	wantContains(t, r.stderr, "not an export file")
	cut := writeFile(t, dir, "cut.jsonl", strings.Join(lines[:3], "\n")+"\n")
	r = cli(t, "", "--addr", dst, "import", cut)
	wantCode(t, r, exitFailed)
	wantContains(t, r.stderr, "truncated")
	r = cli(t, "", "--addr", dst, "import", bin, "--progress", writeFile(t, dir, "bad-progress", "many\n"))
	wantCode(t, r, exitFailed)
	wantContains(t, r.stderr, "not a record count")
}

// The way from Pebble to etcd: a Pebble server's export imported into a
// server on etcd gives the same records (compared as the binary exports
// of both, which hold each record's stored bytes).
func TestExportPebbleToEtcd(t *testing.T) {
	src := startServer(t).Addr()
	mustCLI(t, "", "--addr", src, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", shopProto))
	mustCLI(t, `{"id": 1, "email": "a@x"}`+"\n"+`{"id": 2, "name": "Bo", "email": "b@x"}`+"\n", "--addr", src, "insert", "--type", "shop.User")
	dir := t.TempDir()
	from := filepath.Join(dir, "pebble.pbexport")
	mustCLI(t, "", "--addr", src, "export", "--to", from)

	endpoint := etcdtest.Start(t, etcdtest.Roomy)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dst, done := startServe(t, ctx, "--data", t.TempDir(), "--store", "etcd", "--etcd-endpoints", endpoint, "--etcd-prefix", "/import/")
	defer func() { cancel(); <-done }()
	wantContains(t, mustCLI(t, "", "--addr", dst, "import", from).stdout, "imported 2 records")
	to := filepath.Join(dir, "etcd.pbexport")
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
		t.Fatalf("the etcd server's export (%d bytes) differs from the Pebble server's (%d bytes)", len(b), len(a))
	}
}
