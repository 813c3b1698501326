package orderedcode

import "testing"

func BenchmarkAppendInt(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(8)
	buf := make([]byte, 0, 16)
	for b.Loop() {
		buf = AppendInt(buf[:0], -123456789)
	}
}

func BenchmarkAppendString16(b *testing.B) {
	const s = "user:0123456789a" // 16 bytes, no 0x00: the common case
	b.ReportAllocs()
	b.SetBytes(int64(len(s)))
	buf := make([]byte, 0, 32)
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}

func BenchmarkAppendString16Zeros(b *testing.B) {
	const s = "\x00user\x000123\x0056\x00a" // 16 bytes, four escapes
	b.ReportAllocs()
	b.SetBytes(int64(len(s)))
	buf := make([]byte, 0, 32)
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}

func BenchmarkDecodeAllStringInt(b *testing.B) {
	key := AppendInt(AppendString(nil, "user:0123456789a"), 42)
	kinds := []Kind{KindString, KindInt}
	b.ReportAllocs()
	b.SetBytes(int64(len(key)))
	for b.Loop() {
		if _, err := DecodeAll(key, kinds); err != nil {
			b.Fatal(err)
		}
	}
}
