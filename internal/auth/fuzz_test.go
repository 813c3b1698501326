package auth

import (
	"strings"
	"testing"
)

// FuzzParseAuthorization checks that the header parser never panics, that
// what it accepts is a well-formed key found in the header, and that its
// errors never echo the header.
func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{
		"Bearer pb_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"bearer pb_abcdefghijklmnopqrstuvwxyz012345",
		"Bearer pb_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-",
		"Bearer ",
		"Basic dXNlcjpwYXNz",
		"",
		"Bearer pb_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		key, err := ParseAuthorization(h)
		if err != nil {
			if len(h) > 8 && strings.Contains(err.Error(), h) {
				t.Fatalf("error %q echoes the header", err)
			}
			return
		}
		if ParseKey(key) != nil || !strings.Contains(h, key) {
			t.Fatalf("accepted %q from %q", key, h)
		}
	})
}

// FuzzParseKey checks that ParseKey accepts exactly the keys GenerateKey
// can make: the prefix and the canonical base64url of 24 bytes.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"pb_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"pb_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"pb_////////////////////////////////",
		"PB_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ParseKey(s) != nil {
			return
		}
		if len(s) != KeyLen || !strings.HasPrefix(s, KeyPrefix) {
			t.Fatalf("accepted %q", s)
		}
		for _, c := range []byte(s[len(KeyPrefix):]) {
			if !strings.ContainsRune("-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", rune(c)) {
				t.Fatalf("accepted %q with %q", s, c)
			}
		}
	})
}

// A scope that contains another allows every type the other allows: the
// guarantee that keeps a scoped admin's new keys inside its own scope.
// Outside names exactly what Contains refuses, and a type URL is allowed
// as its full name is.
func FuzzScopeContains(f *testing.F) {
	for _, c := range [][3]string{
		{"shop.*", "shop.User", "shop.User"},
		{"shop.*", "shop.inner.*", "shop.inner.Item"},
		{"shop.User", "shop.*", "shop.Order"},
		{"shop.*", "shopping.User", "shopping.User"},
		{"shop.*", "shopping.*", "x"},
		{"shop.a.*", "shop.*", "shop.b.C"},
		{"a.b.*,c.D", "a.b.c.*,c.D", "a.b.c.E"},
		{"", "shop.User", "x.Y"},
		{"shop.User", "", "x.Y"},
	} {
		f.Add(c[0], c[1], c[2])
	}
	scope := func(list string) (Scope, bool) {
		var types []string
		if list != "" {
			types = strings.Split(list, ",")
		}
		s, err := ParseScope(types)
		return s, err == nil
	}
	f.Fuzz(func(t *testing.T, holder, other, name string) {
		s, ok1 := scope(holder)
		o, ok2 := scope(other)
		if !ok1 || !ok2 {
			return
		}
		contains := s.Contains(o)
		if outside := s.Outside(o); (len(outside) == 0) != contains {
			t.Fatalf("scope %q, other %q: Contains %v but Outside %q", holder, other, contains, outside)
		}
		// The names to try: the one given, and each of other's entries
		// (a wildcard's package with the name, and a type in it).
		names := []string{name}
		for _, e := range o.Types() {
			if pkg, wild := strings.CutSuffix(e, ".*"); wild {
				names = append(names, pkg+"."+name, pkg+".T", pkg+".sub.T")
			} else {
				names = append(names, e)
			}
		}
		for _, n := range names {
			if s.Allows("type.googleapis.com/"+n) != s.Allows(n) {
				t.Fatalf("scope %q: type URL of %q allowed %v, the name %v", holder, n, !s.Allows(n), s.Allows(n))
			}
			if contains && o.Allows(n) && !s.Allows(n) {
				t.Fatalf("scope %q contains %q, which allows %q, but does not allow it", holder, other, n)
			}
		}
	})
}
