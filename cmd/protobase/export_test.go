package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/exitstatus"
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
	wantCode(t, cli(t, "", "--addr", src, "export"), exitstatus.Usage)
	wantCode(t, cli(t, "", "--addr", src, "export", "--to", filepath.Join(dir, "x"), "--format", "xml"), exitstatus.Usage)
	wantCode(t, cli(t, "", "--addr", src, "import"), exitstatus.Usage)
	wantCode(t, cli(t, "", "--addr", src, "import", bin, "--batch", "0"), exitstatus.Usage)
	wantCode(t, cli(t, "", "--addr", src, "import", bin, "--bogus"), exitstatus.Usage)
	// Refused types and files.
	r = cli(t, "", "--addr", src, "export", "--type", "shop.Nope", "--to", filepath.Join(dir, "nope"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "shop.Nope")
	if _, err := os.Stat(filepath.Join(dir, "nope")); !os.IsNotExist(err) {
		t.Fatalf("a failed export left its file: %v", err)
	}
	r = cli(t, "", "--addr", src, "import", writeFile(t, dir, "garbage", "garbage\n"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "not an export file")
	cut := writeFile(t, dir, "cut.jsonl", strings.Join(lines[:3], "\n")+"\n")
	r = cli(t, "", "--addr", dst, "import", cut)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "truncated")
	r = cli(t, "", "--addr", dst, "import", bin, "--progress", writeFile(t, dir, "bad-progress", "many\n"))
	wantCode(t, r, exitstatus.Failed)
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

// An export from a server whose shop.User has no unique email index,
// imported into one that has it: refused by default with the plan named
// and nothing written; under the server's schema (--keep-schema) the
// duplicate email stops the import after the batches before it, which
// stay applied and counted; with --apply-schema the rerun drops the index
// as asked and finishes. A server with the file's schema takes the file
// as before.
func TestImportSchemaDiffers(t *testing.T) {
	loose := strings.Replace(shopProto, ` index: { fields: "email" unique: true }`, "", 1)
	src := startServer(t).Addr()
	dir := t.TempDir()
	mustCLI(t, "", "--addr", src, "schema", "apply", writeFile(t, dir, "shop.proto", loose))
	var in strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&in, `{"id": %d, "email": "u%d@x"}`+"\n", i, i)
	}
	in.WriteString(`{"id": 51, "email": "u1@x"}` + "\n") // u1@x again: no index forbids it here
	mustCLI(t, in.String(), "--addr", src, "insert", "--type", "shop.User")
	file := filepath.Join(dir, "loose.pbexport")
	wantContains(t, mustCLI(t, "", "--addr", src, "export", "--to", file).stdout, "exported 51 records")

	dst := startServer(t).Addr()
	mustCLI(t, "", "--addr", dst, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", shopProto))
	mustCLI(t, `{"id": 100, "email": "own@x"}`+"\n", "--addr", dst, "insert", "--type", "shop.User")
	stored := func() int {
		return strings.Count(mustCLI(t, "", "--addr", dst, "scan", "--type", "shop.User").stdout, `"email"`)
	}

	r := cli(t, "", "--addr", dst, "import", file, "--batch", "10")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "differs from the server's; nothing was imported", "indexes dropped (1):",
		"- shop.User index ", "(email) unique", "--apply-schema", "--keep-schema")
	if n := stored(); n != 1 {
		t.Fatalf("a refused import left %d records, want the server's 1", n)
	}
	wantContains(t, mustCLI(t, "", "--addr", dst, "schema", "get").stdout, "unique: true")
	if _, err := os.Stat(file + ".import-progress"); !os.IsNotExist(err) {
		t.Fatalf("a refused import left a progress file: %v", err)
	}

	// Under the server's schema the unique index refuses record 51.
	r = cli(t, "", "--addr", dst, "import", file, "--batch", "10", "--keep-schema")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "AlreadyExists", "50 of the file's records are durable on the server (50 by this run)",
		"batches acknowledged before the failure stay applied", file+".import-progress", "Rerun the same command")
	if n := stored(); n != 51 {
		t.Fatalf("after the partial import %d records are stored, want 51", n)
	}

	// --apply-schema: the index goes, and the rerun resumes after the 50.
	r = mustCLI(t, "", "--addr", dst, "import", file, "--batch", "10", "--apply-schema")
	wantContains(t, r.stdout, "indexes dropped (1):", "applied the file's schema", "imported 1 records", "(50 skipped")
	if strings.Contains(mustCLI(t, "", "--addr", dst, "schema", "get").stdout, "unique") {
		t.Fatal("--apply-schema kept the unique index")
	}
	if n := stored(); n != 52 {
		t.Fatalf("after --apply-schema %d records are stored, want 52", n)
	}

	// The same schema: imported as it always was, the schema untouched.
	same := startServer(t).Addr()
	mustCLI(t, "", "--addr", same, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", loose))
	r = mustCLI(t, "", "--addr", same, "import", file)
	wantContains(t, r.stdout, "imported 51 records")
	if strings.Contains(r.stdout, "applied the file's schema") {
		t.Fatalf("an import with the server's own schema applied it:\n%s", r.stdout)
	}
	wantCode(t, cli(t, "", "--addr", same, "import", file, "--apply-schema", "--keep-schema"), exitstatus.Usage)
}

// export --versions writes each record's version beside it, the version a
// versioned read returns; import writes the records at new versions.
func TestExportVersionsCommand(t *testing.T) {
	srv := startServer(t)
	src := srv.Addr()
	applyShop(t, src)
	mustCLI(t, `{"id": 1, "email": "a@x"}`+"\n", "--addr", src, "insert", "--type", "shop.User")
	mustCLI(t, `{"id": 2, "email": "b@x"}`+"\n", "--addr", src, "insert", "--type", "shop.User")
	c, err := client.Dial(src)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, vers, err := c.GetVersioned(t.Context(), "shop.User", 1, 2)
	if err != nil || vers[0] == 0 || vers[1] <= vers[0] {
		t.Fatalf("versions %v, %v", vers, err)
	}
	js := filepath.Join(t.TempDir(), "shop.jsonl")
	mustCLI(t, "", "--addr", src, "export", "--to", js, "--format", "json", "--versions")
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, string(b),
		fmt.Sprintf(`{"type":"shop.User","version":"%d","record":{"id":"1","email":"a@x"}}`, vers[0]),
		fmt.Sprintf(`{"type":"shop.User","version":"%d","record":{"id":"2","email":"b@x"}}`, vers[1]))
	wantContains(t, mustCLI(t, "", "export", "--help").stdout, "--versions", "new versions")

	mustCLI(t, "", "--addr", src, "import", js)
	_, after, err := c.GetVersioned(t.Context(), "shop.User", 1, 2)
	if err != nil || after[0] <= vers[1] || after[1] <= vers[1] {
		t.Fatalf("versions after the import %v (before %v), %v", after, vers, err)
	}
}
