package engine_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/engine"
)

// BenchmarkInsertUnique inserts batches of 1,000 records into a type with
// unique indexes: shop.User (a proto3 email without presence, never left
// out) and acct.Account (five unique indexes, four on fields that can be
// absent, two of those absent), to show what the absent-value rule costs a
// write.
func BenchmarkInsertUnique(b *testing.B) {
	for _, c := range []struct{ name, typ, rec string }{
		{"implicit", "shop.User", `{"id": ID, "name": "n", "email": "eID@x"}`},
		{"presence", "acct.Account", `{"id": ID, "handle": "hID", "email": "eID@x", "contact": {"phone": "pID"}, "org": "o"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			te := newEngine(b)
			te.Apply(map[string]string{"shop.proto": shopProto, "acct.proto": acctProto, "legacy.proto": legacyProto})
			id := 0
			batch := func() []*anypb.Any {
				recs := make([]*anypb.Any, 1000)
				for i := range recs {
					id++
					recs[i] = te.Rec(c.typ, replaceID(c.rec, id))
				}
				return recs
			}
			w := te.E.NewWriter()
			defer w.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				recs := batch()
				b.StartTimer()
				if err := w.Apply(b.Context(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func replaceID(s string, id int) string {
	out := ""
	for i := 0; i < len(s); i++ {
		if i+2 <= len(s) && s[i:i+2] == "ID" {
			out += itoa(id)
			i++
			continue
		}
		out += s[i : i+1]
	}
	return out
}
