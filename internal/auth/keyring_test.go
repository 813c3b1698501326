package auth_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store"
)

func openKeyring(t *testing.T, dir string) (*auth.Keyring, func()) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: dir, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(context.Background(), st, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kr, err := auth.OpenKeyring(eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	return kr, func() { _ = eng.Close(); _ = st.Close() }
}

func code(err error) codes.Code { return apierror.Status(err).Code() }

func TestKeyringLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kr, closeFn := openKeyring(t, dir)
	key, info, err := kr.Create(nil, "ingest", auth.RoleWrite, []string{"shop.*"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "ingest" || info.Role != auth.RoleWrite {
		t.Fatalf("info %+v", info)
	}
	id, err := kr.Verify(ctx, key)
	if err != nil || id.Name != "ingest" || !id.AllowsType("shop.User") || id.AllowsType("crm.Lead") {
		t.Fatalf("Verify: %+v, %v", id, err)
	}
	if _, _, err := kr.Create(nil, "ingest", auth.RoleRead, nil); code(err) != codes.AlreadyExists {
		t.Fatalf("duplicate name: %v", err)
	}
	other, _ := auth.GenerateKey()
	if _, err := kr.Verify(ctx, other); code(err) != codes.Unauthenticated {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := kr.Verify(ctx, "pb_short"); code(err) != codes.Unauthenticated {
		t.Fatalf("malformed key: %v", err)
	}
	closeFn()

	// The key survives a restart; revocation reaches an identity made
	// before it and survives a restart too.
	kr, closeFn = openKeyring(t, dir)
	id, err = kr.Verify(ctx, key)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	var hooked []string
	kr.OnRevoke(func(name string) { hooked = append(hooked, name) })
	if err := kr.Revoke(nil, "ingest"); err != nil {
		t.Fatal(err)
	}
	if len(hooked) != 1 || hooked[0] != "ingest" {
		t.Fatalf("revoke hook calls %q, want [ingest]", hooked)
	}
	if !id.Revoked() || code(id.Check()) != codes.Unauthenticated {
		t.Fatal("an identity of a revoked key is not revoked")
	}
	if err := kr.Revoke(nil, "ingest"); code(err) != codes.NotFound {
		t.Fatalf("second revoke: %v", err)
	}
	if len(hooked) != 1 {
		t.Fatalf("a failed revoke ran the hook: %q", hooked)
	}
	closeFn()
	kr, closeFn = openKeyring(t, dir)
	defer closeFn()
	if _, err := kr.Verify(ctx, key); code(err) != codes.Unauthenticated {
		t.Fatalf("revoked key after restart: %v", err)
	}
	if kr.Len() != 0 {
		t.Fatalf("%d keys after revoking the only one", kr.Len())
	}
}
