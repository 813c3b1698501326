package orderedcode

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzRoundTrip encodes a composite key of every kind and checks it decodes
// to equal, canonical values, both as a whole and component by component.
func FuzzRoundTrip(f *testing.F) {
	f.Add(int64(0), uint64(0), 0.0, float32(0), "", []byte(nil), false)
	f.Add(int64(math.MinInt64), uint64(math.MaxUint64), math.Copysign(0, -1), float32(math.NaN()), "a\x00", []byte{0xff, 0}, true)
	f.Add(int64(-1), uint64(1), math.Inf(-1), float32(math.Inf(1)), "\x00\x01", []byte("\x00\xff"), true)
	f.Fuzz(func(t *testing.T, i int64, u uint64, f64 float64, f32 float32, s string, b []byte, bo bool) {
		vals := []Value{Int(i), Uint(u), Float64(f64), Float32(f32), String(s), Bytes(b), Bool(bo), String(s), Int(i)}
		kinds := make([]Kind, len(vals))
		var enc []byte
		for j, v := range vals {
			kinds[j] = v.Kind
			enc = Append(enc, v)
		}

		got, err := DecodeAll(enc, kinds)
		if err != nil {
			t.Fatalf("DecodeAll(Append(%v)) error: %v", vals, err)
		}
		for j := range vals {
			if got[j].Kind != vals[j].Kind || Compare(got[j], vals[j]) != 0 {
				t.Errorf("component %d: decoded %v, want %v", j, got[j], vals[j])
			}
			if (got[j].Kind == KindFloat32 || got[j].Kind == KindFloat64) && !isCanonicalFloat(got[j]) {
				t.Errorf("component %d: decoded %v is not canonical", j, got[j])
			}
		}
		if f32 == f32 && float32(got[3].Float) != f32 {
			t.Errorf("float32 %v decoded as %v", f32, got[3].Float)
		}

		// Component by component, with the typed decoders and Skip.
		rest := enc
		for j, v := range vals {
			one := Append(nil, v)
			if !bytes.HasPrefix(rest, one) {
				t.Fatalf("component %d: composite encoding does not continue with % x", j, one)
			}
			skipped, err := Skip(rest, v.Kind)
			if err != nil || len(rest)-len(skipped) != len(one) {
				t.Fatalf("component %d: Skip consumed %d bytes, err %v; want %d", j, len(rest)-len(skipped), err, len(one))
			}
			rest = skipped
		}
		if len(rest) != 0 {
			t.Fatalf("%d bytes left after skipping every component", len(rest))
		}
		if ds, r, err := DecodeString(AppendString(nil, s)); err != nil || ds != s || len(r) != 0 {
			t.Errorf("DecodeString round trip of %q = %q, % x, %v", s, ds, r, err)
		}
		if !bytes.Equal(AppendString(nil, string(b)), AppendBytes(nil, b)) {
			t.Errorf("AppendString and AppendBytes differ for %q", b)
		}
		if n, r, err := DecodeInt(AppendInt(nil, i)); err != nil || n != i || len(r) != 0 {
			t.Errorf("DecodeInt round trip of %d = %d, %v", i, n, err)
		}
		if n, r, err := DecodeUint(AppendUint(nil, u)); err != nil || n != u || len(r) != 0 {
			t.Errorf("DecodeUint round trip of %d = %d, %v", u, n, err)
		}
	})
}

// FuzzOrder checks that for each kind the byte order of encodings equals
// Compare, including for a composite key, and the string prefix property.
func FuzzOrder(f *testing.F) {
	f.Add(int64(-1), int64(0), uint64(0), uint64(1), 0.0, math.Copysign(0, -1), float32(1), float32(math.NaN()), "a", "a\x00", false, true)
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), uint64(math.MaxUint64), uint64(0), math.NaN(), math.Inf(1), float32(-1), float32(-2), "ab", "a", true, true)
	f.Add(int64(5), int64(5), uint64(7), uint64(7), -1.5, -1.25, float32(0), float32(math.Copysign(0, -1)), "\x00", "", false, false)
	f.Fuzz(func(t *testing.T, i1, i2 int64, u1, u2 uint64, d1, d2 float64, g1, g2 float32, s1, s2 string, b1, b2 bool) {
		pairs := [][2]Value{
			{Int(i1), Int(i2)},
			{Uint(u1), Uint(u2)},
			{Float64(d1), Float64(d2)},
			{Float32(g1), Float32(g2)},
			{String(s1), String(s2)},
			{Bytes([]byte(s1)), Bytes([]byte(s2))},
			{Bool(b1), Bool(b2)},
		}
		for _, p := range pairs {
			want := Compare(p[0], p[1])
			ea, eb := Append(nil, p[0]), Append(nil, p[1])
			if got := bytes.Compare(ea, eb); got != want {
				t.Errorf("bytes.Compare(enc %v, enc %v) = %d, Compare = %d (% x vs % x)", p[0], p[1], got, want, ea, eb)
			}
			if rev := Compare(p[1], p[0]); rev != -want {
				t.Errorf("Compare not antisymmetric on %v, %v", p[0], p[1])
			}
		}

		ta := []Value{String(s1), Int(i1), Float64(d1), Bool(b1)}
		tb := []Value{String(s2), Int(i2), Float64(d2), Bool(b2)}
		want := sign(compareTuple(ta, tb))
		if got := bytes.Compare(appendTuple(nil, ta), appendTuple(nil, tb)); got != want {
			t.Errorf("composite: bytes.Compare(enc %v, enc %v) = %d, want %d", ta, tb, got, want)
		}

		// The prefix property, against s2 and against a prefix of s1 so that
		// the "is a prefix" case is exercised too.
		cut := s1[:min(len(s1), len(s2))]
		for _, p := range []string{s2, cut} {
			pre := AppendStringPrefix(nil, []byte(p))
			end := PrefixEnd(pre)
			enc := AppendInt(AppendString(nil, s1), i1)
			want := strings.HasPrefix(s1, p)
			if got := bytes.HasPrefix(enc, pre); got != want {
				t.Errorf("HasPrefix(enc %q, prefix %q) = %v, want %v", s1, p, got, want)
			}
			inRange := bytes.Compare(enc, pre) >= 0 && (end == nil || bytes.Compare(enc, end) < 0)
			if inRange != want {
				t.Errorf("enc %q in prefix range of %q = %v, want %v", s1, p, inRange, want)
			}
		}
	})
}

// fuzzKinds maps fuzzer bytes to kinds, including invalid ones (0 and 8).
func fuzzKinds(kb []byte) []Kind {
	kinds := make([]Kind, 0, min(len(kb), 16))
	for _, b := range kb[:min(len(kb), 16)] {
		kinds = append(kinds, Kind(b%9))
	}
	return kinds
}

// FuzzDecode feeds arbitrary bytes and kind sequences to the decoders: they
// must never panic, must fail only with ErrMalformed, and whatever they
// accept must re-encode to exactly the input (decoding is canonical).
func FuzzDecode(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add(AppendInt(AppendString(nil, "a\x00b"), -3), []byte{byte(KindString), byte(KindInt)})
	f.Add([]byte("\x00\x00"), []byte{byte(KindString)})
	f.Add([]byte("\x7f\xff\xff\xff\xff\xff\xff\xff"), []byte{byte(KindFloat64)})
	f.Add([]byte{2}, []byte{byte(KindBool), 0, 8})
	f.Fuzz(func(t *testing.T, data, kb []byte) {
		kinds := fuzzKinds(kb)
		vals, err := DecodeAll(data, kinds)

		rest, skipErr := data, error(nil)
		for _, k := range kinds {
			if rest, skipErr = Skip(rest, k); skipErr != nil {
				break
			}
		}
		skipOK := skipErr == nil && len(rest) == 0
		if skipOK != (err == nil) {
			t.Fatalf("Skip ok=%v but DecodeAll err=%v", skipOK, err)
		}

		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %q does not match ErrMalformed", err)
			}
		} else {
			if re := appendTuple(nil, vals); !bytes.Equal(re, data) {
				t.Fatalf("DecodeAll(% x, %v) = %v re-encodes to % x", data, kinds, vals, re)
			}
		}

		// Each kind on its own: an accepted prefix re-encodes to itself.
		for k := Kind(0); k <= KindBytes+1; k++ {
			v, rest, err := Decode(data, k)
			if err != nil {
				if !errors.Is(err, ErrMalformed) || len(rest) != len(data) {
					t.Fatalf("Decode(%v) error %v, rest len %d", k, err, len(rest))
				}
				continue
			}
			consumed := data[:len(data)-len(rest)]
			if re := Append(nil, v); !bytes.Equal(re, consumed) {
				t.Fatalf("Decode(% x, %v) = %v re-encodes to % x, consumed % x", data, k, v, re, consumed)
			}
		}
	})
}
