package record

import "testing"

func BenchmarkValidate(b *testing.B) {
	s := loadSchema(b)
	rec := benchRecord(b, s)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.recordT.Validate(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateFull(b *testing.B) {
	s := loadSchema(b)
	rec := marshal(b, fullRecord(s))
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.recordT.Validate(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func benchGet(b *testing.B, path string) {
	s := loadSchema(b)
	rec := benchRecord(b, s)
	p := mustPath(b, s.recordT, path)
	b.ReportAllocs()
	for b.Loop() {
		if _, found, err := p.Get(rec); err != nil || !found {
			b.Fatal(found, err)
		}
	}
}

func BenchmarkPathGetInt(b *testing.B)    { benchGet(b, "f_int32") }
func BenchmarkPathGetString(b *testing.B) { benchGet(b, "f_string") }
func BenchmarkPathGetNested(b *testing.B) { benchGet(b, "address.geo.lat") }

func BenchmarkPathEachPacked(b *testing.B) {
	s := loadSchema(b)
	rec := benchRecord(b, s)
	p := mustPath(b, s.recordT, "r_int32")
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := p.Each(rec, func(Scalar) bool { n++; return true }); err != nil || n != 10 {
			b.Fatal(n, err)
		}
	}
}
