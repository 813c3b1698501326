package auth

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/internal/apierror"
)

func TestGenerateKeyFormat(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		k, err := GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != KeyLen || !strings.HasPrefix(k, KeyPrefix) {
			t.Fatalf("key %q: want %d characters starting with %s", k, KeyLen, KeyPrefix)
		}
		if err := ParseKey(k); err != nil {
			t.Fatalf("ParseKey(GenerateKey()): %v", err)
		}
		if seen[k] {
			t.Fatal("duplicate key")
		}
		seen[k] = true
	}
}

func TestParseAuthorization(t *testing.T) {
	key, _ := GenerateKey()
	tests := []struct {
		header string
		ok     bool
	}{
		{"Bearer " + key, true},
		{"bearer " + key, true},
		{"BEARER   " + key + "  ", true},
		{"", false},
		{"Bearer", false},
		{"Bearer ", false},
		{"Basic " + key, false},
		{key, false},
		{"Bearer " + key + "x", false},
		{"Bearer " + key[:len(key)-1], false},
		{"Bearer pb_" + strings.Repeat("+", 32), false},                // not base64url
		{"Bearer xx_" + key[3:], false},                                // wrong prefix
		{"Bearer " + key[:len(key)-1] + "B", true},                     // still canonical
		{"Bearer " + strings.Repeat("a", 300), false},                  // too long
		{"Bearer " + key + " " + key, false},                           // two keys
		{"Bearer\t" + key, false},                                      // the scheme ends at a space
		{"Bearer " + KeyPrefix + strings.Repeat("A", 31) + "=", false}, // padding
	}
	for _, tt := range tests {
		got, err := ParseAuthorization(tt.header)
		if (err == nil) != tt.ok {
			t.Errorf("ParseAuthorization(%q): err %v, want ok=%v", tt.header, err, tt.ok)
			continue
		}
		if err != nil && strings.Contains(err.Error(), key) {
			t.Errorf("error %q holds the key", err)
		}
		if tt.ok && len(got) != KeyLen {
			t.Errorf("ParseAuthorization(%q) = %q", tt.header, got)
		}
	}
}

func TestRoles(t *testing.T) {
	for _, n := range []string{"read", "write", "schema", "admin", "ADMIN"} {
		r, err := ParseRole(n)
		if err != nil || !strings.EqualFold(r.String(), n) || RoleFromProto(r.Proto()) != r {
			t.Errorf("ParseRole(%q) = %v, %v", n, r, err)
		}
	}
	if _, err := ParseRole("root"); err == nil {
		t.Error("ParseRole(root) accepted")
	}
	tests := []struct {
		method string
		need   Role
		open   bool
	}{
		{pbgrpc.Protobase_Search_FullMethodName, RoleRead, false},
		{pbgrpc.Protobase_GetSchema_FullMethodName, RoleRead, false},
		{pbgrpc.Protobase_Insert_FullMethodName, RoleWrite, false},
		{pbgrpc.Protobase_Write_FullMethodName, RoleWrite, false},
		{pbgrpc.Protobase_ApplySchema_FullMethodName, RoleSchema, false},
		{pbgrpc.Protobase_CreateKey_FullMethodName, RoleAdmin, false},
		{"/grpc.health.v1.Health/Check", RoleNone, true},
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", RoleRead, false},
		{"/protobase.lab.v1.Lab/Echo", RoleAdmin, false},
		{"/other.Service/Method", RoleAdmin, false},
	}
	for _, tt := range tests {
		need, open := MethodRole(tt.method)
		if need != tt.need || open != tt.open {
			t.Errorf("MethodRole(%s) = %v, %v; want %v, %v", tt.method, need, open, tt.need, tt.open)
		}
	}
}

func TestAllowed(t *testing.T) {
	shop, err := ParseScope([]string{"shop.*", "crm.Contact"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		role  Role
		scope Scope
		need  Role
		typ   string
		want  bool
	}{
		{RoleRead, Scope{}, RoleRead, "any.Type", true},
		{RoleRead, Scope{}, RoleWrite, "any.Type", false},
		{RoleWrite, Scope{}, RoleRead, "", true},
		{RoleSchema, Scope{}, RoleAdmin, "", false},
		{RoleAdmin, Scope{}, RoleSchema, "x.Y", true},
		{RoleNone, Scope{}, RoleNone, "", false},
		{RoleWrite, shop, RoleWrite, "shop.User", true},
		{RoleWrite, shop, RoleWrite, "type.googleapis.com/shop.User", true},
		{RoleWrite, shop, RoleWrite, "shop.v2.Order", true},
		{RoleWrite, shop, RoleWrite, "shopping.User", false},
		{RoleWrite, shop, RoleWrite, "crm.Contact", true},
		{RoleWrite, shop, RoleWrite, "crm.ContactNote", false},
		{RoleWrite, shop, RoleWrite, "crm.Lead", false},
		{RoleRead, shop, RoleWrite, "shop.User", false},
	}
	for _, tt := range tests {
		if got := Allowed(tt.role, tt.scope, tt.need, tt.typ); got != tt.want {
			t.Errorf("Allowed(%v, %v, %v, %q) = %v, want %v", tt.role, tt.scope.Types(), tt.need, tt.typ, got, tt.want)
		}
	}
	for _, bad := range []string{"*", "shop.", ".User", "shop..User", "shop.*.x", "1shop.User", "shop.Us er"} {
		if _, err := ParseScope([]string{bad}); err == nil {
			t.Errorf("ParseScope(%q) accepted", bad)
		}
	}
}

func TestRequire(t *testing.T) {
	ctx := context.Background()
	if id, err := Require(ctx, false, RoleAdmin); id != nil || err != nil {
		t.Fatalf("auth off: %v, %v", id, err)
	}
	if _, err := Require(ctx, true, RoleRead); apierror.CodeOf(err) != apierror.Unauthenticated {
		t.Fatalf("no identity: %v", err)
	}
	id := &Identity{Name: "r", Role: RoleRead}
	if _, err := Require(NewContext(ctx, id), true, RoleWrite); apierror.CodeOf(err) != apierror.PermissionDenied {
		t.Fatalf("read key on a write: %v", err)
	}
	if _, err := Require(NewContext(ctx, id), true, RoleRead); err != nil {
		t.Fatalf("read key on a read: %v", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	key, _ := GenerateKey()
	r := &record{name: "ingest", role: RoleWrite, types: []string{"shop.*"}, hash: Hash(key)}
	got, err := decodeRecord(r.encode())
	if err != nil {
		t.Fatal(err)
	}
	if got.name != r.name || got.role != r.role || got.hash != r.hash || len(got.types) != 1 {
		t.Fatalf("round trip: %+v, want %+v", got, r)
	}
	if _, err := decodeRecord([]byte{0x0a, 0x01, 'x'}); err == nil {
		t.Fatal("record without hash accepted")
	}
}

// BenchmarkVerify is the cost of authenticating a call or a stream (once):
// parse, hash, look up, compare.
func BenchmarkVerify(b *testing.B) {
	key, _ := GenerateKey()
	h := Hash(key)
	e := &entry{rec: &record{name: "k", role: RoleRead, hash: h}}
	k := &Keyring{}
	k.keys.Store(&keyMap{byHash: map[[32]byte]*entry{h: e}, byName: map[string]*entry{"k": e}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.VerifyHeader(context.Background(), "Bearer "+key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckRecords is the per-batch cost on an authenticated write
// stream: the revocation flag and, for a scoped key, the scope of each
// record (1,000 records of one type, or alternating between two).
func BenchmarkCheckRecords(b *testing.B) {
	scope, _ := ParseScope([]string{"shop.*", "crm.Contact"})
	for _, tc := range []struct {
		name  string
		scope Scope
		types []string
	}{
		{"unscoped", Scope{}, []string{"shop.User"}},
		{"scoped/one-type", scope, []string{"shop.User"}},
		{"scoped/two-types", scope, []string{"shop.User", "crm.Contact"}},
	} {
		recs := make([]*anypb.Any, 1000)
		for i := range recs {
			recs[i] = &anypb.Any{TypeUrl: "type.googleapis.com/" + tc.types[i%len(tc.types)]}
		}
		id := &Identity{Name: "k", Role: RoleWrite, Scope: tc.scope, revoked: new(atomic.Bool)}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := id.CheckRecords(recs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestScopeContains(t *testing.T) {
	tests := []struct {
		outer, inner []string
		want         bool
	}{
		{nil, nil, true},
		{nil, []string{"shop.*"}, true},
		{[]string{"shop.*"}, nil, false}, // a scoped key never holds every type
		{[]string{"shop.*"}, []string{"shop.*"}, true},
		{[]string{"shop.*"}, []string{"shop.User"}, true},
		{[]string{"shop.*"}, []string{"shop.v1.*"}, true},
		{[]string{"shop.*"}, []string{"shop.v1.*", "shop.User"}, true},
		{[]string{"a.*"}, []string{"a.b.c.*"}, true},
		{[]string{"shop.User"}, []string{"shop.*"}, false},
		{[]string{"shop.v1.*"}, []string{"shop.*"}, false},
		{[]string{"shop.v1.*", "shop.v2.*"}, []string{"shop.*"}, false},
		{[]string{"shop.User", "shop.Order"}, []string{"shop.*"}, false}, // names are finite, a wildcard is not
		{[]string{"shop.*"}, []string{"shopping.User"}, false},
		{[]string{"shop.*"}, []string{"shopping.*"}, false},
		{[]string{"shop.*"}, []string{"shop"}, false}, // shop.* is the types under shop, not shop itself
		{[]string{"shop.User"}, []string{"shop.User"}, true},
		{[]string{"shop.User"}, []string{"shop.User.*"}, false}, // nested types of User
		{[]string{"shop.User.*"}, []string{"shop.User"}, false},
		{[]string{"shop.User", "shop.User"}, []string{"shop.User"}, true},
		{[]string{"shop.User"}, []string{"shop.User", "shop.User"}, true},
		{[]string{"shop.*", "shop.*"}, []string{"shop.*", "shop.User"}, true},
		{[]string{"shop.User", "crm.*"}, []string{"crm.Lead", "shop.User"}, true},
		{[]string{"shop.User", "crm.*"}, []string{"crm.Lead", "shop.Order"}, false},
		{[]string{"shop.*", "crm.Contact"}, []string{"crm.ContactNote"}, false},
		{[]string{" shop.* "}, []string{"shop.User "}, true},
	}
	for _, tt := range tests {
		outer, err := ParseScope(tt.outer)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := ParseScope(tt.inner)
		if err != nil {
			t.Fatal(err)
		}
		if got := outer.Contains(inner); got != tt.want {
			t.Errorf("%v.Contains(%v) = %v, want %v", tt.outer, tt.inner, got, tt.want)
		}
		if out := outer.Outside(inner); (len(out) == 0) != tt.want {
			t.Errorf("%v.Outside(%v) = %q, disagrees with Contains", tt.outer, tt.inner, out)
		}
		// What Contains claims holds for every type name the cases use.
		if tt.want {
			for _, n := range sampleTypes(tt.outer, tt.inner) {
				if inner.Allows(n) && !outer.Allows(n) {
					t.Errorf("%v contains %v, yet %s is allowed by the second only", tt.outer, tt.inner, n)
				}
			}
		}
	}
	shop, _ := ParseScope([]string{"shop.*", "crm.Contact"})
	wider, _ := ParseScope([]string{"crm.*", "shop.User", "crm.Contact"})
	if got := shop.Outside(wider); len(got) != 1 || got[0] != "crm.*" {
		t.Errorf("Outside = %q, want [crm.*]", got)
	}
	if got := shop.Outside(Scope{}); len(got) != 1 || got[0] != "*" {
		t.Errorf("Outside(every type) = %q, want [*]", got)
	}
}

// sampleTypes returns type names around the scope entries given: each
// name, and names inside and beside each package.
func sampleTypes(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, t := range l {
			name := strings.TrimSuffix(strings.TrimSpace(t), ".*")
			out = append(out, name, name+".X", name+".v9.X", name+"X", name+"ing.X")
		}
	}
	return out
}

func TestIdentityManages(t *testing.T) {
	scope := func(types ...string) Scope {
		s, err := ParseScope(types)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	shopAdmin := &Identity{Name: "shopadmin", Role: RoleAdmin, Scope: scope("shop.*")}
	shopWriter := &Identity{Name: "shopwriter", Role: RoleWrite, Scope: scope("shop.*")}
	admin := &Identity{Name: "admin", Role: RoleAdmin}
	tests := []struct {
		by    *Identity
		role  Role
		scope Scope
		want  bool
	}{
		{nil, RoleAdmin, Scope{}, true},
		{admin, RoleAdmin, Scope{}, true},
		{admin, RoleRead, scope("crm.*"), true},
		{shopAdmin, RoleAdmin, Scope{}, false},
		{shopAdmin, RoleRead, Scope{}, false},
		{shopAdmin, RoleAdmin, scope("shop.*"), true},
		{shopAdmin, RoleRead, scope("shop.User"), true},
		{shopAdmin, RoleRead, scope("shop.*", "crm.*"), false},
		{shopAdmin, RoleRead, scope("crm.*"), false},
		{shopAdmin, RoleRead, scope("shopping.User"), false},
		{shopWriter, RoleWrite, scope("shop.User"), true},
		{shopWriter, RoleSchema, scope("shop.User"), false},
		{shopWriter, RoleAdmin, scope("shop.*"), false},
	}
	for _, tt := range tests {
		if got := tt.by.Manages(tt.role, tt.scope); got != tt.want {
			t.Errorf("%s.Manages(%v, %v) = %v, want %v", tt.by.ActorName(), tt.role, tt.scope, got, tt.want)
		}
	}
}
