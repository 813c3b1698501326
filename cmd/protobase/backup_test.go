package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/exitstatus"
)

// backup, backup verify and restore end to end: the restored directory
// serves the records, and the commands refuse what they must.
func TestBackupRestoreCommands(t *testing.T) {
	admin, _ := auth.GenerateKey()
	t.Setenv("PROTOBASE_ADMIN_KEY", admin)
	t.Setenv("PROTOBASE_API_KEY", "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startServe(t, ctx, "--data", t.TempDir(), "--auth")
	defer func() { cancel(); <-done }()
	mustCLI(t, "", "--addr", addr, "--api-key", admin, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", shopProto))
	mustCLI(t, `{"id": 1, "email": "a@x"}`+"\n"+`{"id": 2, "email": "b@x"}`+"\n", "--addr", addr, "--api-key", admin, "insert", "--type", "shop.User")

	dir := filepath.Join(t.TempDir(), "bk")
	// Refused: no key, a key that is not admin, a key with a scope.
	r := cli(t, "", "--addr", addr, "backup", "--to", dir)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "Unauthenticated")
	reader := strings.TrimSpace(lastLine(mustCLI(t, "", "--addr", addr, "--api-key", admin, "keys", "create", "--name", "r", "--role", "read").stdout))
	r = cli(t, "", "--addr", addr, "--api-key", reader, "backup", "--to", filepath.Join(t.TempDir(), "x"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "PermissionDenied")
	scoped := strings.TrimSpace(lastLine(mustCLI(t, "", "--addr", addr, "--api-key", admin, "keys", "create", "--name", "s", "--role", "admin", "--types", "shop.User").stdout))
	r = cli(t, "", "--addr", addr, "--api-key", scoped, "backup", "--to", filepath.Join(t.TempDir(), "y"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "without a scope")

	r = mustCLI(t, "", "--addr", addr, "--api-key", admin, "backup", "--to", dir)
	wantContains(t, r.stdout, "backup of position ", "(schema version 1)")
	wantContains(t, mustCLI(t, "", "backup", "verify", dir).stdout, "files verified")

	// Bad command lines and directories.
	wantCode(t, cli(t, "", "--addr", addr, "--api-key", admin, "backup"), exitstatus.Usage)
	r = cli(t, "", "--addr", addr, "--api-key", admin, "backup", "--to", dir)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "is not empty")
	wantCode(t, cli(t, "", "restore", "--from", dir), exitstatus.Usage)
	r = cli(t, "", "backup", "verify", t.TempDir())
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "not a backup directory")

	data := filepath.Join(t.TempDir(), "restored")
	wantContains(t, mustCLI(t, "", "restore", "--from", dir, "--data", data).stdout, "restored position ")
	r = cli(t, "", "restore", "--from", dir, "--data", data)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "is not empty")
	if _, err := os.Stat(filepath.Join(data, "admin.key")); !os.IsNotExist(err) {
		t.Fatal("restore wrote an admin key file")
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	addr2, done2 := startServe(t, ctx2, "--data", data, "--auth")
	defer func() { cancel2(); <-done2 }()
	r = mustCLI(t, "", "--addr", addr2, "--api-key", admin, "scan", "--type", "shop.User")
	wantContains(t, r.stdout, `"a@x"`, `"b@x"`)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
