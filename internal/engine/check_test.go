package engine_test

import (
	"bytes"
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/orderedcode"
)

// The corruptions below write the store directly, by the layout of
// docs/design.md: records under 0x01 typeID(4) pk, index entries under
// 0x02 indexID(4) ixkey [pk].

// firstKey returns the first key under prefix whose value or key contains
// sub.
func (te *testEngine) firstKey(prefix []byte, sub string) (key, val []byte) {
	te.T.Helper()
	it, err := te.St.NewIter(prefix, append(slices.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff))
	if err != nil {
		te.T.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.Contains(it.Key(), []byte(sub)) || bytes.Contains(it.Value(), []byte(sub)) {
			return slices.Clone(it.Key()), slices.Clone(it.Value())
		}
	}
	te.T.Fatalf("no key under %x holds %q", prefix, sub)
	return nil, nil
}

func (te *testEngine) raw(set map[string][]byte, del ...[]byte) {
	te.T.Helper()
	b := te.St.NewBatch()
	defer b.Close()
	b.Stamp(1) // the version of the records set behind the engine's back
	for k, v := range set {
		b.Set([]byte(k), v)
	}
	for _, k := range del {
		b.Delete(k)
	}
	if err := te.St.Commit(b); err != nil {
		te.T.Fatal(err)
	}
}

func TestCheckFindsEveryInconsistency(t *testing.T) {
	type corruption func(te *testEngine)
	cases := []struct {
		name    string
		corrupt corruption
		want    []engine.ProblemKind
	}{
		{"none", func(*testEngine) {}, nil},
		{"entry lost", func(te *testEngine) {
			k, _ := te.firstKey([]byte{0x02}, "ann@x")
			te.raw(nil, k)
		}, []engine.ProblemKind{engine.ProblemMissingEntry}},
		{"record lost", func(te *testEngine) {
			k, _ := te.firstKey([]byte{0x01}, "bob@x")
			te.raw(nil, k)
		}, []engine.ProblemKind{engine.ProblemDanglingEntry, engine.ProblemDanglingEntry}},
		{"record changed behind the indexes", func(te *testEngine) {
			k, _ := te.firstKey([]byte{0x01}, "bob@x")
			te.raw(map[string][]byte{string(k): te.Rec("shop.User", `{"id": 2, "name": "Rob", "email": "rob@x"}`).Value})
		}, []engine.ProblemKind{engine.ProblemMissingEntry, engine.ProblemMissingEntry, engine.ProblemStaleEntry, engine.ProblemStaleEntry}},
		{"unique value shared", func(te *testEngine) {
			k, v := te.firstKey([]byte{0x01}, "ann@x")
			dup := orderedcode.AppendInt(slices.Clone(k[:5]), 99)
			te.raw(map[string][]byte{string(dup): v})
		}, []engine.ProblemKind{engine.ProblemDuplicateUnique, engine.ProblemMissingEntry}},
		{"unique entry stolen", func(te *testEngine) {
			kAnn, _ := te.firstKey([]byte{0x02}, "ann@x")
			_, vBob := te.firstKey([]byte{0x02}, "bob@x")
			te.raw(map[string][]byte{string(kAnn): vBob})
		}, []engine.ProblemKind{engine.ProblemMissingEntry, engine.ProblemStaleEntry}},
		{"orphans", func(te *testEngine) {
			te.raw(map[string][]byte{
				string([]byte{0x02, 0xff, 0, 0, 1, 7}): nil,
				string([]byte{0x01, 0xff, 0, 0, 1, 7}): nil,
			})
		}, []engine.ProblemKind{engine.ProblemOrphanRecord, engine.ProblemOrphanEntry}},
		{"undecodable primary key", func(te *testEngine) {
			k, v := te.firstKey([]byte{0x01}, "ann@x")
			te.raw(map[string][]byte{string(append(slices.Clone(k[:5]), 0x99)): v})
		}, []engine.ProblemKind{engine.ProblemBadKey}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			te := newEngine(t)
			te.MustWrite(engine.OpInsert, []*anypb.Any{
				te.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "ann@x"}`),
				te.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "bob@x"}`),
				te.Rec("shop.Member", `{"org": "o", "id": 1, "handle": "h"}`),
			})
			c.corrupt(te)
			r, err := engine.Check(t.Context(), te.St)
			if err != nil {
				t.Fatal(err)
			}
			var got []engine.ProblemKind
			for _, p := range r.Problems {
				got = append(got, p.Kind)
				if p.Key == nil || p.Detail == "" || p.String() == "" {
					t.Errorf("problem without key or detail: %+v", p)
				}
			}
			slices.Sort(got)
			want := slices.Clone(c.want)
			slices.Sort(want)
			if !slices.Equal(got, want) || r.OK() != (len(want) == 0) {
				t.Fatalf("problems %v, want %v", r.Problems, want)
			}
			var out bytes.Buffer
			if _, err := r.WriteTo(&out); err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 && !bytes.Contains(out.Bytes(), []byte("consistent\n")) {
				t.Fatalf("report %q", out.String())
			}
		})
	}
}

// BenchmarkCheck measures Check over 100,000 users with two indexes
// (300,000 keys, each read once by iteration and once by a point read).
func BenchmarkCheck(b *testing.B) {
	te := newEngine(b)
	const n = 100000
	for start := 0; start < n; start += 1000 {
		recs := make([]*anypb.Any, 0, 1000)
		for i := start; i < start+1000; i++ {
			recs = append(recs, te.Rec("shop.User", `{"id": `+itoa(i)+`, "name": "n`+itoa(i%100)+`", "email": "e`+itoa(i)+`@x"}`))
		}
		te.MustWrite(engine.OpInsert, recs)
	}
	if err := te.E.Compact(b.Context()); err != nil { // a settled store, as on disk
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := engine.Check(b.Context(), te.St)
		if err != nil || !r.OK() || r.Records != n {
			b.Fatalf("check: %v %v", r, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
}
