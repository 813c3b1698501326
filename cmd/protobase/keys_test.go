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

func TestKeysCommands(t *testing.T) {
	admin, _ := auth.GenerateKey()
	t.Setenv("PROTOBASE_ADMIN_KEY", admin)
	t.Setenv("PROTOBASE_API_KEY", "")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startServe(t, ctx, "--data", dir, "--auth")
	defer func() { cancel(); <-done }()
	if _, err := os.Stat(filepath.Join(dir, "admin.key")); !os.IsNotExist(err) {
		t.Fatal("serve wrote admin.key although PROTOBASE_ADMIN_KEY was set")
	}

	r := cli(t, "", "--addr", addr, "keys", "list")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "Unauthenticated")

	r = mustCLI(t, "", "--addr", addr, "--api-key", admin, "keys", "create", "--name", "ingest", "--role", "write", "--types", "shop.User,crm.*")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	key := lines[len(lines)-1]
	if auth.ParseKey(key) != nil {
		t.Fatalf("the last line of keys create is not a key:\n%s", r.stdout)
	}

	// The key from the environment works like --api-key.
	t.Setenv("PROTOBASE_API_KEY", admin)
	r = mustCLI(t, "", "--addr", addr, "keys", "list")
	wantContains(t, r.stdout, "ingest", "write", "crm.*,shop.User", "admin")
	if strings.Contains(r.stdout, key) || strings.Contains(r.stdout, admin) {
		t.Fatalf("keys list shows a key:\n%s", r.stdout)
	}

	// The new key writes its types and nothing else.
	t.Setenv("PROTOBASE_API_KEY", key)
	r = cli(t, "", "--addr", addr, "keys", "list")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "PermissionDenied")

	mustCLI(t, "", "--addr", addr, "--api-key", admin, "keys", "revoke", "ingest")
	r = cli(t, "", "--addr", addr, "--api-key", key, "schema", "get")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "Unauthenticated", "revoked")

	r = cli(t, "", "--addr", addr, "--api-key", admin, "keys", "create", "--name", "x", "--role", "root")
	wantCode(t, r, exitstatus.Usage)
	r = cli(t, "", "serve", "--data", t.TempDir(), "--auth", "--insecure-no-auth")
	wantCode(t, r, exitstatus.Usage)
}
