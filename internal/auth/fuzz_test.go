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
