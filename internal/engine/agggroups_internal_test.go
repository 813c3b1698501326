package engine

import (
	"math"
	"strings"
	"testing"
)

// TestFingerprintStrings: strings of up to 16 bytes have a fingerprint,
// equal only for equal strings (every string over a two-letter alphabet up
// to 12 bytes, and strings of 13 to 16 bytes that share their first and
// last 8 bytes); longer strings have none; an absent value's differs from
// the empty string's.
func TestFingerprintStrings(t *testing.T) {
	f := &aggField{cls: vBytes}
	seen := map[[fpWords]uint64]string{}
	add := func(s string) {
		t.Helper()
		var w [fpWords]uint64
		if !f.fingerprint(&aggVal{ok: true, b: []byte(s)}, &w) {
			t.Fatalf("%q (%d bytes) has no fingerprint", s, len(s))
		}
		var again [fpWords]uint64
		f.fingerprint(&aggVal{ok: true, b: []byte(s)}, &again)
		if again != w {
			t.Fatalf("%q: fingerprints %v and %v", s, w, again)
		}
		if o, dup := seen[w]; dup {
			t.Fatalf("%q and %q have one fingerprint %v", o, s, w)
		}
		seen[w] = s
	}
	for n := range 13 {
		for bitsOf := range 1 << n {
			var b strings.Builder
			for i := range n {
				b.WriteByte("ab"[bitsOf>>i&1])
			}
			add(b.String())
		}
	}
	for n := 13; n <= 16; n++ {
		for _, mid := range []string{"", "x", "xy", "yx", "xyz"} {
			if s := "abcdefgh" + mid + "ijklmnop"; len(s) == n {
				add(s)
			}
		}
		add(strings.Repeat("a", n))
	}
	var absent [fpWords]uint64
	if !f.fingerprint(&aggVal{}, &absent) {
		t.Fatal("an absent value has no fingerprint")
	}
	if o, dup := seen[absent]; dup {
		t.Fatalf("an absent value and %q have one fingerprint", o)
	}
	var w [fpWords]uint64
	if f.fingerprint(&aggVal{ok: true, b: []byte(strings.Repeat("a", 17))}, &w) {
		t.Fatal("a string of 17 bytes has a fingerprint")
	}
}

// TestFingerprintNumbers: numbers' fingerprints are equal for equal bits
// and differ otherwise, absent apart; a time's counts its nanoseconds.
func TestFingerprintNumbers(t *testing.T) {
	for _, tc := range []struct {
		cls  valClass
		a, b aggVal
		same bool
	}{
		{vInt, aggVal{ok: true, i: 7}, aggVal{ok: true, i: 7}, true},
		{vInt, aggVal{ok: true, i: 7}, aggVal{ok: true, i: -7}, false},
		{vInt, aggVal{ok: true}, aggVal{}, false},
		{vBool, aggVal{ok: true, i: 1}, aggVal{ok: true}, false},
		{vUint, aggVal{ok: true, u: math.MaxUint64}, aggVal{ok: true, u: math.MaxUint64}, true},
		{vUint, aggVal{ok: true, u: 1}, aggVal{ok: true, u: 2}, false},
		{vFloat, aggVal{ok: true, f: 1.5}, aggVal{ok: true, f: 1.5}, true},
		{vFloat, aggVal{ok: true, f: 1.5}, aggVal{ok: true, f: 2.5}, false},
		{vFloat, aggVal{ok: true}, aggVal{}, false},
		{vTime, aggVal{ok: true, i: 5, n: 1}, aggVal{ok: true, i: 5, n: 1}, true},
		{vTime, aggVal{ok: true, i: 5, n: 1}, aggVal{ok: true, i: 5, n: 2}, false},
	} {
		f := &aggField{cls: tc.cls}
		var wa, wb [fpWords]uint64
		if !f.fingerprint(&tc.a, &wa) || !f.fingerprint(&tc.b, &wb) {
			t.Fatalf("%+v or %+v has no fingerprint", tc.a, tc.b)
		}
		if (wa == wb) != tc.same {
			t.Errorf("class %d: %+v and %+v: fingerprints %v and %v, want same %v", tc.cls, tc.a, tc.b, wa, wb, tc.same)
		}
	}
}
