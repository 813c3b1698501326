package layout

import "testing"

// BenchmarkLayout is the client side of the layout experiment as plain Go
// benchmarks, named like the seed's (Tiny/FlatMarshal, …) so that their
// output reads beside it:
//
//	go test -run '^$' -bench Layout -benchmem ./bench/layout/
func BenchmarkLayout(b *testing.B) {
	for _, sz := range layoutSizes {
		ev, err := newLayoutEvents(sz.bytes)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range layoutCases(ev) {
			b.Run(sz.name+"/"+benchName(c), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(sz.bytes))
				if err := c.fn(b.N); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// benchName is the seed's benchmark name of c ("FlatMarshal",
// "WrappedUnmarshal"), with "+payload" as "Full".
func benchName(c layoutCase) string {
	name := map[string]string{"flat": "Flat", "wrapped": "Wrapped"}[c.layout]
	switch c.op {
	case "copy":
		return "CopyFloor"
	case "marshal":
		return name + "Marshal"
	case "unmarshal":
		return name + "Unmarshal"
	case "marshal+payload":
		return name + "MarshalFull"
	default:
		return name + "UnmarshalFull"
	}
}
