package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/certs/certstest"
	"github.com/protobase/protobase/internal/exitstatus"
)

// A key whose scope excludes a record type is told so, with its scope
// named: the schema holds the type, the key may not see it.
func TestScopedKeyNamesItsScope(t *testing.T) {
	admin, _ := auth.GenerateKey()
	t.Setenv("PROTOBASE_ADMIN_KEY", admin)
	t.Setenv("PROTOBASE_API_KEY", "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startServe(t, ctx, "--data", t.TempDir(), "--auth")
	defer func() { cancel(); <-done }()
	mustCLI(t, "", "--addr", addr, "--api-key", admin, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", shopProto))
	r := mustCLI(t, "", "--addr", addr, "--api-key", admin, "keys", "create", "--name", "crm", "--role", "write", "--types", "crm.*")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	key := lines[len(lines)-1]

	r = cli(t, "", "--addr", addr, "--api-key", key, "get", "--type", "shop.User", "1")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, `"shop.User" is outside this API key's scope (crm.*)`)
	if strings.Contains(r.stderr, "no record types") || strings.Contains(r.stderr, "apply a schema") {
		t.Fatalf("a scoped key is told to apply a schema:\n%s", r.stderr)
	}
}

// A write the server refuses before applying anything (a read key) says
// so, without the sentence kept for a connection lost mid-write.
func TestRefusedWriteIsNotAmbiguous(t *testing.T) {
	admin, _ := auth.GenerateKey()
	t.Setenv("PROTOBASE_ADMIN_KEY", admin)
	t.Setenv("PROTOBASE_API_KEY", "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startServe(t, ctx, "--data", t.TempDir(), "--auth")
	defer func() { cancel(); <-done }()
	mustCLI(t, "", "--addr", addr, "--api-key", admin, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", shopProto))
	r := mustCLI(t, "", "--addr", addr, "--api-key", admin, "keys", "create", "--name", "reader", "--role", "read")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	key := lines[len(lines)-1]

	r = cli(t, `{"id": 1, "name": "Ann", "email": "ann@x"}`+"\n", "--addr", addr, "--api-key", key, "insert", "--type", "shop.User")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "applied: nothing; the server refused the call")
	if strings.Contains(r.stderr, "may or may not") {
		t.Fatalf("a refused write is called ambiguous:\n%s", r.stderr)
	}
	// A first line that is not a record: nothing is sent.
	r = cli(t, "{\"nope\": 1}\n", "--addr", addr, "--api-key", admin, "insert", "--type", "shop.User")
	wantCode(t, r, exitstatus.Failed)
	if strings.Contains(r.stderr, "may or may not") {
		t.Fatalf("a write stopped before sending is called ambiguous:\n%s", r.stderr)
	}
}

// An unquoted word compared with a string field is answered with the
// quoted form, not an enum mismatch.
func TestUnquotedStringSuggestsQuoting(t *testing.T) {
	srv := startServer(t)
	applyShop(t, srv.Addr())
	r := cli(t, "", "--addr", srv.Addr(), "query", "--type", "shop.User", "--where", "name = Ann")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, `quote a string, as in name = "Ann"`)
}

// A watch from past the newest position names the newest position, where
// the user can start from instead.
func TestWatchPastNewestNamesNewest(t *testing.T) {
	srv := startServer(t)
	applyShop(t, srv.Addr())
	mustCLI(t, `{"id": 1, "name": "Ann", "email": "ann@x"}`+"\n", "--addr", srv.Addr(), "insert", "--type", "shop.User")
	r := cli(t, "", "--addr", srv.Addr(), "watch", "--type", "shop.User", "--from", "99999999")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "past the newest commit 1", "start after commit 1 (the newest position)", "--from now")
}

// restore's errors are a restore's: none reads "backup:".
func TestRestoreErrorsSayRestore(t *testing.T) {
	r := cli(t, "", "restore", "--from", t.TempDir(), "--data", filepath.Join(t.TempDir(), "new"))
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "restore: ", "not a backup directory")
	if strings.Contains(r.stderr, "backup:") {
		t.Fatalf("a restore error reads as a backup's:\n%s", r.stderr)
	}
}

// A client without --tls-ca that reaches a TLS listener is told the
// server speaks TLS and which flag to pass.
func TestPlaintextToTLSNamesTheFlag(t *testing.T) {
	ca := certstest.NewCA(t, "test")
	cert := ca.Server(t, "server")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startServe(t, ctx, "--data", t.TempDir(), "--sync=false",
		"--tls-cert", cert.CertFile, "--tls-key", cert.KeyFile)
	defer func() { cancel(); <-done }()
	r := cli(t, "", "--addr", addr, "schema", "get")
	wantCode(t, r, exitstatus.Failed)
	t.Logf("%s", r.stderr)
	wantContains(t, r.stderr, "speaks TLS", "--tls-ca")
}
