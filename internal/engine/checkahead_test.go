package engine_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// On etcd the checker reads a pass's records and entries ahead, in
// prefetched groups of a thousand or so: over records spanning several
// groups it finds the same problems as one read at a time would, wherever
// they fall, and none in a consistent store.
func TestCheckReadsAheadOnEtcd(t *testing.T) {
	e, hs := openShared(t, etcdtest.Start(t, etcdtest.Roomy))
	const n = 2500
	w := e.NewWriter()
	defer w.Close()
	for id := 1; id <= n; id += 500 {
		recs := make([]*anypb.Any, 0, 500)
		for i := id; i < id+500; i++ {
			recs = append(recs, sharedUser(t, e, i))
		}
		if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	check := func() *engine.CheckReport {
		t.Helper()
		r, err := engine.Check(t.Context(), hs)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := check(); !r.OK() || r.Records != n || r.Entries != 2*n {
		t.Fatalf("consistent store: %d records, %d entries, problems %v; want %d, %d, none", r.Records, r.Entries, r.Problems, n, 2*n)
	}

	// Behind the engine's back: one entry of u2200 and the record of
	// u1700 (whose two entries then dangle).
	entry, _ := keyWith(t, hs, []byte{0x02}, "u2200@example.com")
	rec, _ := keyWith(t, hs, []byte{0x01}, "u1700@example.com")
	b := hs.NewWriteBatch()
	defer b.Close()
	b.Delete(entry)
	b.Delete(rec)
	if err := hs.ApplyBatch(b); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	r := check()
	var got []engine.ProblemKind
	for _, p := range r.Problems {
		got = append(got, p.Kind)
	}
	slices.Sort(got)
	want := []engine.ProblemKind{engine.ProblemMissingEntry, engine.ProblemDanglingEntry, engine.ProblemDanglingEntry}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("problems %v, want kinds %v", r.Problems, want)
	}
}
