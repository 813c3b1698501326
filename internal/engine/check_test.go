package engine_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/pebble"
)

// The corruptions below write the store directly, by the layout of
// docs/design.md: records under 0x01 typeID(4) pk, index entries under
// 0x02 indexID(4) ixkey [pk].

// firstKey returns the first key under prefix whose value or key contains
// sub.
func (te *testEngine) firstKey(prefix []byte, sub string) (key, val []byte) {
	te.T.Helper()
	return keyWith(te.T, te.St, prefix, sub)
}

// keyWith returns the first key under prefix of st, and its value, whose
// key or value contains sub.
func keyWith(t testing.TB, st store.KV, prefix []byte, sub string) (key, val []byte) {
	t.Helper()
	snap, err := st.OpenSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	it, err := snap.NewIterator(prefix, keyspace.PrefixEnd(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.Contains(it.Key(), []byte(sub)) || bytes.Contains(it.Value(), []byte(sub)) {
			return slices.Clone(it.Key()), slices.Clone(it.Value())
		}
	}
	t.Fatalf("no key under %x holds %q", prefix, sub)
	return nil, nil
}

func (te *testEngine) raw(set map[string][]byte, del ...[]byte) {
	te.T.Helper()
	te.stamped(1, set, del...) // an old version for records set behind the engine's back
}

// loseEntry deletes the non-unique index entry k behind the engine's
// back, from the group the store may keep it in.
func (te *testEngine) loseEntry(k []byte) {
	te.T.Helper()
	b := te.St.NewBatch()
	defer b.Close()
	b.DeleteEntry(k)
	if err := te.St.Commit(b); err != nil {
		te.T.Fatal(err)
	}
}

// stamped is raw with the records set at version.
func (te *testEngine) stamped(version uint64, set map[string][]byte, del ...[]byte) {
	te.T.Helper()
	b := te.St.NewBatch()
	defer b.Close()
	b.Stamp(version)
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
		{"version above the last commit", func(te *testEngine) {
			k, v := te.firstKey([]byte{0x01}, "bob@x")
			te.stamped(1<<40, map[string][]byte{string(k): v})
		}, []engine.ProblemKind{engine.ProblemBadVersion}},
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

// Version headers written behind the store's back, one cut short and one
// holding version 0, are each named by the checker; a record stored
// without a header (before versions existed) is not a problem.
func TestCheckFindsBadVersionHeaders(t *testing.T) {
	te := newEngine(t)
	te.MustWrite(engine.OpInsert, []*anypb.Any{
		te.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "ann@x"}`),
		te.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "bob@x"}`),
		te.Rec("shop.User", `{"id": 3, "name": "Cy", "email": "cy@x"}`),
	})
	kAnn, _ := te.firstKey([]byte{0x01}, "ann@x")
	kBob, vBob := te.firstKey([]byte{0x01}, "bob@x")
	kCy, vCy := te.firstKey([]byte{0x01}, "cy@x")
	dir := te.Dir
	te.Close()

	// The store's own writes always carry a well-formed header: write the
	// values with Pebble itself, as a bug or a tool might.
	db, err := cpebble.Open(dir, &cpebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string][]byte{
		string(kAnn): {0x00, 0x00, 0x01},               // a header cut short
		string(kBob): append(make([]byte, 9), vBob...), // version 0
		string(kCy):  vCy,                              // no header: stored before versions
	} {
		if err := db.Set([]byte(k), v, cpebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	st, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := engine.Check(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, p := range r.Problems {
		if p.Kind == engine.ProblemBadVersion {
			found[string(p.Key)] = p.Detail
		}
	}
	if len(found) != 2 || !strings.Contains(found[string(kAnn)], "holds 3 bytes, fewer than the header's 9") ||
		!strings.Contains(found[string(kBob)], "version 0") {
		t.Fatalf("bad-version problems %q; all: %v", found, r.Problems)
	}
	var out bytes.Buffer
	if _, err := r.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "bad-version shop.User key "+hex.EncodeToString(kBob)) {
		t.Fatalf("report:\n%s", out.String())
	}
}

// quietLogger drops Pebble's messages.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
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
