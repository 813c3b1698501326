package auth_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/apistatus"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
)

func openKeyring(t *testing.T, dir string) (*auth.Keyring, func()) {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, Sync: true})
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

func code(err error) apierror.Code { return apierror.CodeOf(err) }

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
	if _, _, err := kr.Create(nil, "ingest", auth.RoleRead, nil); code(err) != apierror.AlreadyExists {
		t.Fatalf("duplicate name: %v", err)
	}
	other, _ := auth.GenerateKey()
	if _, err := kr.Verify(ctx, other); code(err) != apierror.Unauthenticated {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := kr.Verify(ctx, "pb_short"); code(err) != apierror.Unauthenticated {
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
	if !id.Revoked() || code(id.Check()) != apierror.Unauthenticated {
		t.Fatal("an identity of a revoked key is not revoked")
	}
	if err := kr.Revoke(nil, "ingest"); code(err) != apierror.NotFound {
		t.Fatalf("second revoke: %v", err)
	}
	if len(hooked) != 1 {
		t.Fatalf("a failed revoke ran the hook: %q", hooked)
	}
	closeFn()
	kr, closeFn = openKeyring(t, dir)
	defer closeFn()
	if _, err := kr.Verify(ctx, key); code(err) != apierror.Unauthenticated {
		t.Fatalf("revoked key after restart: %v", err)
	}
	if kr.Len() != 0 {
		t.Fatalf("%d keys after revoking the only one", kr.Len())
	}
}

// TestKeyringKeysStayInScope is the key-management rule on a real keyring:
// a key creates, lists and revokes only keys inside its own role and
// scope. Refusals change nothing.
func TestKeyringKeysStayInScope(t *testing.T) {
	ctx := context.Background()
	kr, closeFn := openKeyring(t, t.TempDir())
	defer closeFn()
	ids := map[string]*auth.Identity{}
	for _, k := range []struct {
		name  string
		role  auth.Role
		types []string
	}{
		{"admin", auth.RoleAdmin, nil},
		{"shopadmin", auth.RoleAdmin, []string{"shop.*"}},
		{"shopwriter", auth.RoleWrite, []string{"shop.*"}},
		{"user-reader", auth.RoleRead, []string{"shop.User"}},
		{"v1-schemer", auth.RoleSchema, []string{"shop.v1.*"}},
		{"reader", auth.RoleRead, nil},
		{"crm-writer", auth.RoleWrite, []string{"crm.*"}},
		{"shopping-reader", auth.RoleRead, []string{"shopping.User"}},
	} {
		key, _, err := kr.Create(nil, k.name, k.role, k.types)
		if err != nil {
			t.Fatal(err)
		}
		if ids[k.name], err = kr.Verify(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	names := func(by *auth.Identity) string {
		var out []string
		for _, k := range kr.List(by) {
			out = append(out, k.Name)
		}
		return strings.Join(out, " ")
	}
	all := names(nil)
	if got := names(ids["admin"]); got != all {
		t.Fatalf("the unscoped admin lists %q, want every key %q", got, all)
	}
	if got, want := names(ids["shopadmin"]), "shopadmin shopwriter user-reader v1-schemer"; got != want {
		t.Fatalf("shopadmin lists %q, want %q", got, want)
	}
	if got, want := names(ids["shopwriter"]), "shopwriter user-reader"; got != want {
		t.Fatalf("shopwriter lists %q, want %q", got, want)
	}

	creates := []struct {
		by, name string
		role     auth.Role
		types    []string
		want     apierror.Code
		msg      string // in the refusal
	}{
		{"shopadmin", "escalated", auth.RoleAdmin, nil, apierror.PermissionDenied, "it reaches only types shop.*, not every type"},
		{"shopadmin", "everything-reader", auth.RoleRead, nil, apierror.PermissionDenied, "every type"},
		{"shopadmin", "wider", auth.RoleRead, []string{"shop.*", "crm.*"}, apierror.PermissionDenied, "types shop.*, and crm.* lies outside"},
		{"shopadmin", "crm", auth.RoleRead, []string{"crm.Lead"}, apierror.PermissionDenied, "and crm.Lead lies outside"},
		{"shopadmin", "shopping", auth.RoleRead, []string{"shopping.*"}, apierror.PermissionDenied, "and shopping.* lies outside"},
		{"shopwriter", "up", auth.RoleSchema, []string{"shop.User"}, apierror.PermissionDenied, "role schema is above its own role write"},
		{"user-reader", "pkg", auth.RoleRead, []string{"shop.*"}, apierror.PermissionDenied, "it reaches only types shop.User, and shop.* lies outside"},
		{"shopadmin", "shop-user-reader", auth.RoleRead, []string{"shop.User"}, apierror.OK, ""},
		{"shopadmin", "shop-admin-2", auth.RoleAdmin, []string{"shop.*"}, apierror.OK, ""},
		{"shopadmin", "shop-v2", auth.RoleWrite, []string{"shop.v2.*", "shop.Order"}, apierror.OK, ""},
		{"shopwriter", "shop-writer-2", auth.RoleWrite, []string{"shop.User"}, apierror.OK, ""},
	}
	for _, c := range creates {
		before := names(nil)
		_, _, err := kr.Create(ids[c.by], c.name, c.role, c.types)
		if code(err) != c.want {
			t.Fatalf("%s creates %s (%s, %v): %v, want %v", c.by, c.name, c.role, c.types, err, c.want)
		}
		if c.want == apierror.OK {
			continue
		}
		msg := apistatus.Status(err).Message()
		if !strings.Contains(msg, fmt.Sprintf("%q", c.by)) || !strings.Contains(msg, "role "+c.role.String()) || !strings.Contains(msg, c.msg) {
			t.Errorf("refusal %q: want the caller %q, the role %s and %q", msg, c.by, c.role, c.msg)
		}
		if after := names(nil); after != before {
			t.Fatalf("a refused create changed the keys: %q, want %q", after, before)
		}
	}

	// A key outside the caller's view is answered as a name that does not
	// exist.
	for _, r := range []struct{ by, name string }{
		{"shopadmin", "admin"}, {"shopadmin", "reader"}, {"shopadmin", "crm-writer"},
		{"shopadmin", "shopping-reader"}, {"shopwriter", "shopadmin"}, {"shopwriter", "v1-schemer"},
		{"shopadmin", "no-such-key"},
	} {
		before := names(nil)
		err := kr.Revoke(ids[r.by], r.name)
		if code(err) != apierror.NotFound || apistatus.Status(err).Message() != fmt.Sprintf("no API key named %q", r.name) {
			t.Fatalf("%s revokes %s: %v, want the NOT_FOUND of a missing key", r.by, r.name, err)
		}
		if after := names(nil); after != before {
			t.Fatalf("a refused revoke changed the keys: %q, want %q", after, before)
		}
		if ids[r.name] != nil && ids[r.name].Revoked() {
			t.Fatalf("a refused revoke flagged %s revoked", r.name)
		}
	}
	for _, r := range []struct{ by, name string }{
		{"shopadmin", "shop-user-reader"}, {"shopadmin", "shop-admin-2"}, {"shopadmin", "v1-schemer"},
		{"shopwriter", "shop-writer-2"}, {"admin", "crm-writer"}, {"admin", "shop-v2"},
	} {
		if err := kr.Revoke(ids[r.by], r.name); err != nil {
			t.Fatalf("%s revokes %s: %v", r.by, r.name, err)
		}
	}
	if got, want := names(nil), "admin reader shopadmin shopping-reader shopwriter user-reader"; got != want {
		t.Fatalf("keys left %q, want %q", got, want)
	}
}
