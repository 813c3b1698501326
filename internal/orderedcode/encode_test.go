package orderedcode

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Non-canonical NaNs: negative, and with a payload.
var (
	negNaN64     = math.Float64frombits(0xFFF8_0000_0000_0000)
	payloadNaN64 = math.Float64frombits(0x7FF0_0000_0000_0001)
	negNaN32     = math.Float32frombits(0xFFC0_0000)
	payloadNaN32 = math.Float32frombits(0x7F80_0001)
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// isCanonicalFloat reports whether a decoded float has no negative zero and
// only the canonical NaN, which is what decoding must produce.
func isCanonicalFloat(v Value) bool {
	if v.Kind == KindFloat32 {
		f := float32(v.Float)
		return !(f == 0 && math.Signbit(float64(f))) && (f == f || math.Float32bits(f) == canonicalNaN32)
	}
	return !(v.Float == 0 && math.Signbit(v.Float)) && (!math.IsNaN(v.Float) || math.Float64bits(v.Float) == canonicalNaN64)
}

func TestKindString(t *testing.T) {
	want := map[Kind]string{
		KindInt: "int", KindUint: "uint", KindBool: "bool", KindFloat32: "float32",
		KindFloat64: "float64", KindString: "string", KindBytes: "bytes",
		0: "Kind(0)", 8: "Kind(8)", 255: "Kind(255)",
	}
	for k, s := range want {
		if got := k.String(); got != s {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, s)
		}
		if got, want := k.Valid(), k >= 1 && k <= 7; got != want {
			t.Errorf("Kind(%d).Valid() = %v, want %v", uint8(k), got, want)
		}
	}
}

// appendTyped encodes v with the kind-specific function rather than Append,
// so the table test checks both entry points agree.
func appendTyped(dst []byte, v Value) []byte {
	switch v.Kind {
	case KindInt:
		return AppendInt(dst, v.Int)
	case KindUint:
		return AppendUint(dst, v.Uint)
	case KindBool:
		return AppendBool(dst, v.Bool)
	case KindFloat32:
		return AppendFloat32(dst, float32(v.Float))
	case KindFloat64:
		return AppendFloat64(dst, v.Float)
	case KindString:
		return AppendString(dst, string(v.Bytes))
	case KindBytes:
		return AppendBytes(dst, v.Bytes)
	}
	panic("bad kind")
}

func TestEncodeEdgeValues(t *testing.T) {
	tests := []struct {
		v   Value
		hex string
	}{
		{Int(math.MinInt64), "00 00 00 00 00 00 00 00"},
		{Int(math.MinInt64 + 1), "00 00 00 00 00 00 00 01"},
		{Int(-1), "7f ff ff ff ff ff ff ff"},
		{Int(0), "80 00 00 00 00 00 00 00"},
		{Int(1), "80 00 00 00 00 00 00 01"},
		{Int(math.MaxInt64), "ff ff ff ff ff ff ff ff"},
		{Int(math.MinInt32), "7f ff ff ff 80 00 00 00"},
		{Uint(0), "00 00 00 00 00 00 00 00"},
		{Uint(1), "00 00 00 00 00 00 00 01"},
		{Uint(math.MaxUint32), "00 00 00 00 ff ff ff ff"},
		{Uint(math.MaxUint64), "ff ff ff ff ff ff ff ff"},
		{Bool(false), "00"},
		{Bool(true), "01"},
		{Float64(math.Inf(-1)), "00 0f ff ff ff ff ff ff"},
		{Float64(-1), "40 0f ff ff ff ff ff ff"},
		{Float64(math.Copysign(0, -1)), "80 00 00 00 00 00 00 00"},
		{Float64(0), "80 00 00 00 00 00 00 00"},
		{Float64(math.SmallestNonzeroFloat64), "80 00 00 00 00 00 00 01"},
		{Float64(1), "bf f0 00 00 00 00 00 00"},
		{Float64(math.MaxFloat64), "ff ef ff ff ff ff ff ff"},
		{Float64(math.Inf(1)), "ff f0 00 00 00 00 00 00"},
		{Float64(math.NaN()), "ff f8 00 00 00 00 00 00"},
		{Float64(negNaN64), "ff f8 00 00 00 00 00 00"},
		{Float64(payloadNaN64), "ff f8 00 00 00 00 00 00"},
		{Float32(float32(math.Inf(-1))), "00 7f ff ff"},
		{Float32(-1), "40 7f ff ff"},
		{Float32(float32(math.Copysign(0, -1))), "80 00 00 00"},
		{Float32(0), "80 00 00 00"},
		{Float32(1), "bf 80 00 00"},
		{Float32(float32(math.Inf(1))), "ff 80 00 00"},
		{Float32(float32(math.NaN())), "ff c0 00 00"},
		{Float32(negNaN32), "ff c0 00 00"},
		{Float32(payloadNaN32), "ff c0 00 00"},
		{String(""), "00 01"},
		{String("a"), "61 00 01"},
		{String("a\x00"), "61 00 ff 00 01"},
		{String("ab"), "61 62 00 01"},
		{String("\x00"), "00 ff 00 01"},
		{String("\x00\x00"), "00 ff 00 ff 00 01"},
		{String("\xff"), "ff 00 01"},
		{String("\x00\xff\x01"), "00 ff ff 01 00 01"},
		{Bytes(nil), "00 01"},
		{Bytes([]byte{0, 1, 0xff, 0}), "00 ff 01 ff 00 ff 00 01"},
	}
	for _, tt := range tests {
		want := mustHex(t, tt.hex)
		got := Append(nil, tt.v)
		if !bytes.Equal(got, want) {
			t.Errorf("Append(%v) = % x, want % x", tt.v, got, want)
		}
		if typed := appendTyped([]byte("pre"), tt.v); !bytes.Equal(typed, append([]byte("pre"), want...)) {
			t.Errorf("typed append of %v = % x, want pre+% x", tt.v, typed, want)
		}

		dec, rest, err := Decode(append(slices.Clip(got), 0xAB), tt.v.Kind)
		if err != nil {
			t.Errorf("Decode(% x, %v): %v", got, tt.v.Kind, err)
			continue
		}
		if !bytes.Equal(rest, []byte{0xAB}) {
			t.Errorf("Decode(%v) rest = % x, want ab", tt.v, rest)
		}
		if dec.Kind != tt.v.Kind || Compare(dec, tt.v) != 0 {
			t.Errorf("Decode(Append(%v)) = %v", tt.v, dec)
		}
		if (dec.Kind == KindFloat32 || dec.Kind == KindFloat64) && !isCanonicalFloat(dec) {
			t.Errorf("Decode(Append(%v)) = %v is not canonical (bits %#x)", tt.v, dec, math.Float64bits(dec.Float))
		}
		if (dec.Kind == KindString || dec.Kind == KindBytes) && dec.Bytes == nil {
			t.Errorf("Decode(Append(%v)).Bytes is nil", tt.v)
		}
	}
}

func TestCompare(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		a, b Value
		want int
	}{
		{Float64(nan), Float64(nan), 0},
		{Float64(nan), Float64(negNaN64), 0},
		{Float64(nan), Float64(inf), 1},
		{Float64(math.Inf(-1)), Float64(nan), -1},
		{Float64(math.Copysign(0, -1)), Float64(0), 0},
		{Float32(float32(nan)), Float32(float32(inf)), 1},
		{Float32(payloadNaN32), Float32(float32(nan)), 0},
		// Float32 compares after rounding, as the encoding does.
		{Value{Kind: KindFloat32, Float: 1}, Value{Kind: KindFloat32, Float: 1 + 1e-12}, 0},
		{Value{Kind: KindFloat32, Float: 1e300}, Float32(float32(inf)), 0},
		{Bool(false), Bool(true), -1},
		{Bool(true), Bool(true), 0},
		{String("a"), Bytes([]byte("a")), -1}, // different kinds order by Kind
		{Int(5), Uint(0), -1},
		{String("a"), String("a\x00"), -1},
		{Int(-1), Int(0), -1},
		{Uint(math.MaxUint64), Uint(0), 1},
	}
	for _, tt := range tests {
		if got := Compare(tt.a, tt.b); got != tt.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := Compare(tt.b, tt.a); got != -tt.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// groups lists values in strictly increasing order; values in one group are
// equal to each other.
type groups [][]Value

func ints(vs ...int64) groups {
	g := make(groups, len(vs))
	for i, v := range vs {
		g[i] = []Value{Int(v)}
	}
	return g
}

func uints(vs ...uint64) groups {
	g := make(groups, len(vs))
	for i, v := range vs {
		g[i] = []Value{Uint(v)}
	}
	return g
}

func strs(kind Kind, vs ...string) groups {
	g := make(groups, len(vs))
	for i, v := range vs {
		g[i] = []Value{{Kind: kind, Bytes: []byte(v)}}
	}
	return g
}

func floats64(vs ...float64) groups {
	g := make(groups, len(vs))
	for i, v := range vs {
		g[i] = []Value{Float64(v)}
	}
	return g
}

func floats32(vs ...float32) groups {
	g := make(groups, len(vs))
	for i, v := range vs {
		g[i] = []Value{Float32(v)}
	}
	return g
}

func checkOrder(t *testing.T, gs groups) {
	t.Helper()
	type item struct {
		g   int
		v   Value
		enc []byte
	}
	var items []item
	for gi, g := range gs {
		for _, v := range g {
			items = append(items, item{gi, v, Append(nil, v)})
		}
	}
	for _, a := range items {
		for _, b := range items {
			want := sign(a.g - b.g)
			if got := Compare(a.v, b.v); got != want {
				t.Errorf("Compare(%v, %v) = %d, want %d", a.v, b.v, got, want)
			}
			if got := bytes.Compare(a.enc, b.enc); got != want {
				t.Errorf("bytes.Compare(enc %v, enc %v) = %d, want %d (% x vs % x)", a.v, b.v, got, want, a.enc, b.enc)
			}
		}
	}
}

func TestOrder(t *testing.T) {
	negZero := math.Copysign(0, -1)
	inf := math.Inf(1)
	t.Run("int", func(t *testing.T) {
		checkOrder(t, ints(math.MinInt64, math.MinInt64+1, math.MinInt32-1, math.MinInt32,
			-256, -255, -1, 0, 1, 255, 256, math.MaxInt32, math.MaxInt32+1, math.MaxInt64-1, math.MaxInt64))
	})
	t.Run("uint", func(t *testing.T) {
		checkOrder(t, uints(0, 1, 255, 256, math.MaxUint32, math.MaxUint32+1, math.MaxUint64-1, math.MaxUint64))
	})
	t.Run("bool", func(t *testing.T) {
		checkOrder(t, groups{{Bool(false)}, {Bool(true)}})
	})
	t.Run("float64", func(t *testing.T) {
		gs := floats64(math.Inf(-1), -math.MaxFloat64, -1e10, -1, math.Nextafter(-1, 0), -0.5,
			-math.SmallestNonzeroFloat64)
		gs = append(gs, []Value{Float64(negZero), Float64(0)})
		gs = append(gs, floats64(math.SmallestNonzeroFloat64, 0.5, math.Nextafter(1, 0), 1,
			math.Nextafter(1, 2), 1e10, math.MaxFloat64, inf)...)
		gs = append(gs, []Value{Float64(math.NaN()), Float64(negNaN64), Float64(payloadNaN64)})
		checkOrder(t, gs)
	})
	t.Run("float32", func(t *testing.T) {
		gs := floats32(float32(math.Inf(-1)), -math.MaxFloat32, -1e10, -1, -0.5, -math.SmallestNonzeroFloat32)
		gs = append(gs, []Value{Float32(float32(negZero)), Float32(0)})
		gs = append(gs, floats32(math.SmallestNonzeroFloat32, 0.5, 1, math.Nextafter32(1, 2), 1e10,
			math.MaxFloat32, float32(inf))...)
		gs = append(gs, []Value{Float32(float32(math.NaN())), Float32(negNaN32), Float32(payloadNaN32)})
		checkOrder(t, gs)
	})
	sorted := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x01", "a", "a\x00", "a\x00\x00",
		"a\x00\x01", "a\x00\xff", "a\x01", "aa", "ab", "b", "\xff", "\xff\x00", "\xff\xff"}
	t.Run("string", func(t *testing.T) { checkOrder(t, strs(KindString, sorted...)) })
	t.Run("bytes", func(t *testing.T) { checkOrder(t, strs(KindBytes, sorted...)) })
}

// compareTuple is the lexicographic order of composite keys.
func compareTuple(a, b []Value) int {
	for i := range min(len(a), len(b)) {
		if c := Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func appendTuple(dst []byte, vs []Value) []byte {
	for _, v := range vs {
		dst = Append(dst, v)
	}
	return dst
}

func checkTupleOrder(t *testing.T, sorted [][]Value) {
	t.Helper()
	for i, a := range sorted {
		for j, b := range sorted {
			want := sign(i - j)
			if got := sign(compareTuple(a, b)); got != want {
				t.Fatalf("test bug: compareTuple(%v, %v) = %d, want %d", a, b, got, want)
			}
			ea, eb := appendTuple(nil, a), appendTuple(nil, b)
			if got := bytes.Compare(ea, eb); got != want {
				t.Errorf("bytes.Compare(enc %v, enc %v) = %d, want %d (% x vs % x)", a, b, got, want, ea, eb)
			}
		}
	}
}

func TestCompositeOrder(t *testing.T) {
	s, i := String, Int
	checkTupleOrder(t, [][]Value{
		{s(""), i(-1)},
		{s(""), i(0)},
		{s("\x00"), i(math.MinInt64)},
		{s("a"), i(math.MinInt64)},
		{s("a"), i(math.MaxInt64)},
		{s("a\x00"), i(math.MinInt64)},
		{s("a\x00"), i(7)},
		{s("a\x01"), i(0)},
		{s("ab"), i(0)},
		{s("b"), i(-5)},
	})
	checkTupleOrder(t, [][]Value{
		{s("a"), s("")},
		{s("a"), s("b")},
		{s("a"), s("\xff")},
		{s("a\x00"), s("")},
		{s("ab"), s("")},
	})
	checkTupleOrder(t, [][]Value{
		{i(-1), s("z"), Float64(math.NaN())},
		{i(0), s(""), Float64(math.Inf(-1))},
		{i(0), s(""), Float64(0)},
		{i(0), s(""), Float64(math.NaN())},
		{i(0), s("a"), Float64(-1)},
		{i(1), s(""), Float64(-1)},
	})
}

// TestRandomOrder sorts random values by Compare and checks the encodings
// come out sorted too, covering values the hand-written lists miss.
func TestRandomOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x00, 0x01, 'a', 0xfe, 0xff}
	gen := map[Kind]func() Value{
		KindInt:     func() Value { return Int(int64(r.Uint64() >> r.IntN(64))) },
		KindUint:    func() Value { return Uint(r.Uint64() >> r.IntN(64)) },
		KindFloat64: func() Value { return Float64(math.Float64frombits(r.Uint64())) },
		KindFloat32: func() Value { return Float32(math.Float32frombits(r.Uint32())) },
		KindString: func() Value {
			b := make([]byte, r.IntN(5))
			for i := range b {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
			return Bytes(b)
		},
	}
	for kind, g := range gen {
		vs := make([]Value, 2000)
		for i := range vs {
			vs[i] = g()
			if kind == KindInt && r.IntN(2) == 0 {
				vs[i].Int = -vs[i].Int
			}
		}
		slices.SortFunc(vs, Compare)
		for i := 1; i < len(vs); i++ {
			want := Compare(vs[i-1], vs[i])
			if got := bytes.Compare(Append(nil, vs[i-1]), Append(nil, vs[i])); got != want {
				t.Errorf("%v: bytes.Compare(enc %v, enc %v) = %d, want %d", kind, vs[i-1], vs[i], got, want)
			}
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	tests := []struct {
		p, want []byte
	}{
		{nil, nil},
		{[]byte{}, nil},
		{[]byte{0xff}, nil},
		{[]byte{0xff, 0xff}, nil},
		{[]byte{0x00}, []byte{0x01}},
		{[]byte{0x01}, []byte{0x02}},
		{[]byte{0x01, 0xff}, []byte{0x02}},
		{[]byte{0x61, 0x62, 0xff, 0xff}, []byte{0x61, 0x63}},
		{[]byte{0x61, 0xfe}, []byte{0x61, 0xff}},
		{[]byte{0x00, 0x00}, []byte{0x00, 0x01}},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.p)
		got := PrefixEnd(in)
		if !bytes.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("PrefixEnd(% x) = % x, want % x", tt.p, got, tt.want)
		}
		if !bytes.Equal(in, tt.p) {
			t.Errorf("PrefixEnd modified its input: % x, was % x", in, tt.p)
		}
		if got == nil {
			continue
		}
		if bytes.HasPrefix(got, tt.p) || bytes.Compare(got, tt.p) <= 0 {
			t.Errorf("PrefixEnd(% x) = % x is not above the prefix range", tt.p, got)
		}
		// Every key with the prefix, however long, sorts below the end.
		for _, suffix := range [][]byte{nil, {0}, {0xff}, bytes.Repeat([]byte{0xff}, 20)} {
			k := append(slices.Clone(tt.p), suffix...)
			if bytes.Compare(k, got) >= 0 {
				t.Errorf("key % x with prefix % x is not below PrefixEnd % x", k, tt.p, got)
			}
		}
		// got is the smallest such bound: dropping its last byte's increment
		// gives a key that still has the prefix or sorts below it.
		if below := got[:len(got)-1]; bytes.Compare(below, tt.p) > 0 && !bytes.HasPrefix(below, tt.p) {
			t.Errorf("PrefixEnd(% x) = % x is not minimal", tt.p, got)
		}
	}
	// The result must not share memory with the input.
	p := []byte{1, 2, 3}
	e := PrefixEnd(p)
	e[0] = 9
	if p[0] != 1 {
		t.Error("PrefixEnd result aliases its input")
	}
}

// allStrings returns every string of length <= n over alphabet.
func allStrings(alphabet string, n int) []string {
	out := []string{""}
	prev := []string{""}
	for range n {
		var next []string
		for _, p := range prev {
			for i := range len(alphabet) {
				next = append(next, p+alphabet[i:i+1])
			}
		}
		out = append(out, next...)
		prev = next
	}
	return out
}

func TestAppendStringPrefix(t *testing.T) {
	if got, want := AppendStringPrefix([]byte("x"), []byte("a\x00\xff")), mustHex(t, "78 61 00 ff ff"); !bytes.Equal(got, want) {
		t.Errorf("AppendStringPrefix = % x, want % x", got, want)
	}
	all := allStrings("\x00\x01a\xff", 3)
	for _, p := range all {
		pre := AppendStringPrefix(nil, []byte(p))
		end := PrefixEnd(pre)
		for _, s := range all {
			want := strings.HasPrefix(s, p)
			// A trailing component must not change the answer.
			for _, enc := range [][]byte{AppendString(nil, s), AppendInt(AppendString(nil, s), 0), AppendString(AppendString(nil, s), "\x00")} {
				if got := bytes.HasPrefix(enc, pre); got != want {
					t.Errorf("HasPrefix(% x, % x) = %v, want %v (s=%q p=%q)", enc, pre, got, want, s, p)
				}
				inRange := bytes.Compare(enc, pre) >= 0 && (end == nil || bytes.Compare(enc, end) < 0)
				if inRange != want {
					t.Errorf("enc(%q) in [% x, % x) = %v, want %v", s, pre, end, inRange, want)
				}
			}
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	enc := func(vs ...Value) []byte { return appendTuple(nil, vs) }
	tests := []struct {
		name  string
		b     []byte
		kinds []Kind
		msg   string
	}{
		{"int short", make([]byte, 7), []Kind{KindInt}, "int needs 8 bytes, have 7"},
		{"uint empty", nil, []Kind{KindUint}, "uint needs 8 bytes, have 0"},
		{"bool empty", nil, []Kind{KindBool}, "bool needs 1 bytes"},
		{"bool 2", []byte{2}, []Kind{KindBool}, "bool byte 0x02"},
		{"bool ff", []byte{0xff}, []Kind{KindBool}, "bool byte 0xff"},
		{"float32 short", make([]byte, 3), []Kind{KindFloat32}, "float32 needs 4 bytes"},
		{"float64 short", make([]byte, 4), []Kind{KindFloat64}, "float64 needs 8 bytes"},
		{"float64 negative zero", mustHex(t, "7fffffffffffffff"), []Kind{KindFloat64}, "not canonical"},
		{"float64 payload NaN", mustHex(t, "ffffffffffffffff"), []Kind{KindFloat64}, "not canonical"},
		{"float64 negative NaN", mustHex(t, "0007ffffffffffff"), []Kind{KindFloat64}, "not canonical"},
		{"float32 negative zero", mustHex(t, "7fffffff"), []Kind{KindFloat32}, "not canonical"},
		{"float32 payload NaN", mustHex(t, "ffc00001"), []Kind{KindFloat32}, "not canonical"},
		{"string empty", nil, []Kind{KindString}, "no terminator"},
		{"string unterminated", []byte("abc"), []Kind{KindString}, "no terminator"},
		{"string lone zero", []byte("ab\x00"), []Kind{KindBytes}, "lone 0x00 at offset 2"},
		{"string escaped then end", []byte("\x00\xff"), []Kind{KindString}, "no terminator"},
		{"string bad escape 00", []byte("a\x00\x00\x00\x01"), []Kind{KindString}, "invalid escape 0x00 0x00 at offset 1"},
		{"string bad escape 02", []byte("\x00\x02"), []Kind{KindString}, "invalid escape 0x00 0x02"},
		{"unknown kind 0", []byte{0}, []Kind{0}, "unknown kind 0"},
		{"unknown kind 8", []byte{0}, []Kind{8}, "unknown kind 8"},
		{"trailing bytes", append(enc(Int(1)), 0), []Kind{KindInt}, "1 trailing bytes after 1 components"},
		{"trailing with no kinds", []byte{1}, nil, "1 trailing bytes after 0 components"},
		{"second component short", append(enc(String("a")), 1, 2), []Kind{KindString, KindInt}, "(component 1 of 2, int, at byte 3)"},
		{"second string unterminated", append(enc(Int(1)), 'x'), []Kind{KindInt, KindString}, "component 1 of 2, string, at byte 8"},
		{"missing component", enc(Int(1)), []Kind{KindInt, KindBool}, "bool needs 1 bytes, have 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals, err := DecodeAll(tt.b, tt.kinds)
			if err == nil {
				t.Fatalf("DecodeAll(% x, %v) = %v, want error", tt.b, tt.kinds, vals)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %q does not match ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "keys: malformed key: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if len(tt.kinds) == 1 {
				v, rest, err := Decode(tt.b, tt.kinds[0])
				if err == nil && len(rest) == 0 {
					t.Errorf("Decode(% x) = %v with no error and no trailing bytes", tt.b, v)
				}
				if err != nil && (len(rest) != len(tt.b) || len(rest) > 0 && &rest[0] != &tt.b[0]) {
					t.Errorf("Decode error path returned rest % x, want the input", rest)
				}
			}
		})
	}
}

func TestDecodeVariants(t *testing.T) {
	in := AppendInt(AppendString(nil, "a\x00b"), 42)

	v, rest, err := Decode(in, KindString)
	if err != nil || string(v.Bytes) != "a\x00b" {
		t.Fatalf("Decode = %v, %v", v, err)
	}
	in[0] = 'z'
	if string(v.Bytes) != "a\x00b" {
		t.Error("Decode result aliases its input")
	}
	in[0] = 'a'

	s, rest2, err := DecodeString(in)
	if err != nil || s != "a\x00b" || !bytes.Equal(rest, rest2) {
		t.Errorf("DecodeString = %q, % x, %v", s, rest2, err)
	}
	if s, _, err := DecodeString(AppendString(nil, "plain")); err != nil || s != "plain" {
		t.Errorf("DecodeString(plain) = %q, %v", s, err)
	}

	buf := append(make([]byte, 0, 64), "pre:"...)
	out, rest3, err := DecodeBytesAppend(buf, in)
	if err != nil || string(out) != "pre:a\x00b" || !bytes.Equal(rest, rest3) || &out[0] != &buf[0] {
		t.Errorf("DecodeBytesAppend = %q, % x, %v", out, rest3, err)
	}
	if out, _, err := DecodeBytesAppend(nil, AppendString(nil, "\x00\x00")); err != nil || string(out) != "\x00\x00" {
		t.Errorf("DecodeBytesAppend(nil) = %q, %v", out, err)
	}

	rest4, err := Skip(in, KindString)
	if err != nil || !bytes.Equal(rest, rest4) {
		t.Errorf("Skip = % x, %v", rest4, err)
	}
	if n, rest5, err := DecodeInt(rest4); err != nil || n != 42 || len(rest5) != 0 {
		t.Errorf("DecodeInt = %d, % x, %v", n, rest5, err)
	}
	for k := KindInt; k <= KindBytes; k++ {
		if _, err := Skip(nil, k); !errors.Is(err, ErrMalformed) {
			t.Errorf("Skip(nil, %v) err = %v", k, err)
		}
	}
	if _, err := Skip([]byte{0}, 99); !errors.Is(err, ErrMalformed) {
		t.Errorf("Skip(kind 99) err = %v", err)
	}

	vals, err := DecodeAll(nil, nil)
	if err != nil || len(vals) != 0 {
		t.Errorf("DecodeAll(nil, nil) = %v, %v", vals, err)
	}
}

func TestAppendInvalidKindPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("Append of kind 0 did not panic")
		}
	}()
	Append(nil, Value{})
}

func TestAppendAllocs(t *testing.T) {
	buf := make([]byte, 0, 128)
	str := "sixteen-byte-key"
	withZeros := "a\x00b\x00\x00c"
	bs := []byte(withZeros)
	cases := map[string]func(){
		"Int":          func() { buf = AppendInt(buf[:0], -7) },
		"Uint":         func() { buf = AppendUint(buf[:0], 7) },
		"Bool":         func() { buf = AppendBool(buf[:0], true) },
		"Float32":      func() { buf = AppendFloat32(buf[:0], -1.5) },
		"Float64":      func() { buf = AppendFloat64(buf[:0], math.NaN()) },
		"String":       func() { buf = AppendString(buf[:0], str) },
		"StringZeros":  func() { buf = AppendString(buf[:0], withZeros) },
		"Bytes":        func() { buf = AppendBytes(buf[:0], bs) },
		"StringPrefix": func() { buf = AppendStringPrefix(buf[:0], bs) },
		"ValueString":  func() { buf = Append(buf[:0], Value{Kind: KindString, Bytes: bs}) },
		"ValueFloat32": func() { buf = Append(buf[:0], Value{Kind: KindFloat32, Float: 2}) },
		"Composite": func() {
			buf = Append(Append(AppendInt(buf[:0], 1), Value{Kind: KindBytes, Bytes: bs}), Value{Kind: KindUint, Uint: 3})
		},
		"Skip":              func() { _, _ = Skip([]byte("ab\x00\xffc\x00\x01"), KindString) },
		"DecodeBytesAppend": func() { buf, _, _ = DecodeBytesAppend(buf[:0], []byte("ab\x00\xffc\x00\x01")) },
	}
	for name, f := range cases {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
}
