package engine_test

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
)

var aheadSeed = flag.Uint64("ahead.seed", 0, "seed of TestAheadMatchesApply (0: from the clock)")

// aheadExtraProto is a type the test adds and drops mid-stream: a schema
// change between a batch's Prepare and its Apply, which must prepare it
// again against the new catalog.
const aheadExtraProto = `syntax = "proto3";
package rx;
import "protobase/v1/options.proto";
message Extra {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
}
`

// TestAheadMatchesApply holds batches applied with phase 1 done ahead
// (engine.Ahead, prepared on another goroutine while the batch before is
// applied, as the write streams do) to the same batches applied without:
// every batch's result, error for error, and the stores' whole contents
// after, on random batches of every operation over few keys (conflicts,
// keys repeated within a batch, unique values taken), with malformed
// records, unknown types, patches (which Prepare leaves to Apply),
// schema changes between a batch's Prepare and its Apply, and Aheads
// handed a batch other than the one they prepared.
func TestAheadMatchesApply(t *testing.T) {
	seed := *aheadSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -ahead.seed=%d)", seed, seed)
	rnd := rand.New(rand.NewPCG(seed, 38))
	plain := openEngine(t, t.TempDir(), engine.Options{})
	ahead := openEngine(t, t.TempDir(), engine.Options{})
	files := map[string]string{"rp.proto": repeatedProto}
	plain.Apply(files)
	ahead.Apply(files)
	re := &repeatedEngine{t: t, e: plain.E, st: plain.St}

	const n = 400
	batches := make([]engine.Batch, n)
	next := int64(1)
	for i := range batches {
		batches[i] = randomAheadBatch(rnd, re, &next)
	}
	pw, aw := plain.E.NewWriter(), ahead.E.NewWriter()
	defer pw.Close()
	defer aw.Close()
	aheads := [2]*engine.Ahead{ahead.E.NewAhead(), ahead.E.NewAhead()}
	aheads[0].Prepare(batches[0])
	taken, refused := 0, 0
	for i, b := range batches {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if i+1 < n {
				aheads[(i+1)%2].Prepare(batches[i+1])
			}
		}()
		switch rnd.IntN(12) {
		case 0: // a schema change after Prepare: rx.Extra added or dropped
			if _, ok := files["rx.proto"]; ok {
				delete(files, "rx.proto")
				plain.ApplyDropping(files, "rx.Extra")
				ahead.ApplyDropping(files, "rx.Extra")
			} else {
				files["rx.proto"] = aheadExtraProto
				plain.Apply(files)
				ahead.Apply(files)
			}
		case 1: // other records than the Ahead prepared
			b = randomAheadBatch(rnd, re, &next)
		case 2: // the same records in another slice
			b.Records = slices.Clone(b.Records)
		case 3: // the same records with another operation
			switch b.Op {
			case engine.OpInsert:
				b.Op = engine.OpUpsert
			case engine.OpUpsert:
				b.Op = engine.OpInsert
			}
		}
		ab := b
		ab.Ahead = aheads[i%2]
		perr := pw.Apply(t.Context(), b)
		aerr := aw.Apply(t.Context(), ab)
		<-done
		if got, want := describeWrite(aerr), describeWrite(perr); got != want {
			t.Fatalf("seed %d: batch %d (%v of %d records): with an Ahead %s, without %s", seed, i, b.Op, len(b.Records), got, want)
		}
		if perr == nil {
			taken++
		} else {
			refused++
		}
	}
	if taken < n/5 || refused < n/20 {
		t.Fatalf("seed %d: %d batches applied, %d refused: the batches no longer reach both outcomes", seed, taken, refused)
	}
	if used := engine.AheadsTaken(aheads[0]) + engine.AheadsTaken(aheads[1]); used < n/4 {
		t.Fatalf("seed %d: Apply took %d of %d batches from their Ahead", seed, used, n)
	}
	for _, w := range []*engine.Writer{pw, aw} {
		if _, err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := dumpStore(t, ahead), dumpStore(t, plain); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("seed %d: the stores differ: %d keys and values with Aheads, %d without", seed, len(got)/2, len(want)/2)
	}
	ahead.MustCheck()
}

// randomAheadBatch is a batch of one operation (or of per-record ones):
// rp.Doc records, inserted mostly under new ids (*next counts them) and
// otherwise under ids that may exist, and among inserts and upserts
// rp.Handle records of ids 1–12, whose unique names come from eight
// values.
func randomAheadBatch(rnd *rand.Rand, re *repeatedEngine, next *int64) engine.Batch {
	ops := []engine.Op{engine.OpInsert, engine.OpInsert, engine.OpUpsert, engine.OpUpsert, engine.OpUpdate, engine.OpRemove, engine.OpPatch}
	b := engine.Batch{Op: ops[rnd.IntN(len(ops))]}
	if b.Op == engine.OpPatch {
		b.Fields = []string{"tags"}
	}
	size := 1 + rnd.IntN(30)
	if b.Op != engine.OpInsert && b.Op != engine.OpUpsert {
		size = 1 + rnd.IntN(4) // of ids that may be gone
	}
	for range size {
		if (b.Op == engine.OpInsert || b.Op == engine.OpUpsert) && rnd.IntN(10) == 0 {
			h := struct {
				ID    int64    `json:"id,string"`
				Names []string `json:"names,omitempty"`
			}{ID: 1 + rnd.Int64N(12)}
			for range rnd.IntN(3) {
				h.Names = append(h.Names, modelTags[rnd.IntN(len(modelTags))])
			}
			b.Records = append(b.Records, re.rec("rp.Handle", h))
			continue
		}
		id := 1 + rnd.Int64N(*next)
		if b.Op == engine.OpInsert && rnd.IntN(40) > 0 {
			id = *next
			*next++
		}
		b.Records = append(b.Records, re.rec("rp.Doc", randomDoc(rnd, id)))
	}
	if rnd.IntN(10) == 0 { // refused unless the schema has rx.Extra
		b.Records = append(b.Records, &anypb.Any{
			TypeUrl: "type.googleapis.com/rx.Extra",
			Value:   protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(*next)), //nolint:gosec // positive
		})
		*next++
	}
	switch rnd.IntN(40) {
	case 0:
		a := b.Records[rnd.IntN(len(b.Records))]
		a.Value = append(slices.Clone(a.Value), 0xff) // a truncated tag
	case 1:
		b.Records[rnd.IntN(len(b.Records))].TypeUrl = "type.googleapis.com/rp.Nothing"
	case 2, 3: // per-record operations: Prepare leaves them to Apply
		for range b.Records {
			b.Ops = append(b.Ops, pb.WriteOp_WRITE_OP_UPSERT)
		}
		b.Op, b.Fields = 0, nil
	}
	return b
}

// describeWrite is a write's result as a comparable string: its code,
// message and the WriteError's fields.
func describeWrite(err error) string {
	if err == nil {
		return "applied"
	}
	e := apierror.From(err)
	return fmt.Sprintf("%v %q %v", e.Code, e.Msg, e.Write)
}

// dumpStore is every key and value of te's store, in order, but for the
// store's secret (random to each).
func dumpStore(t *testing.T, te *testEngine) [][]byte {
	t.Helper()
	snap, err := te.St.OpenSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	it, err := snap.NewIterator(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		if string(it.Key()) == keyspace.SecretKey {
			continue
		}
		out = append(out, slices.Clone(it.Key()), slices.Clone(it.Value()))
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAheadKeepsNoLargeScratch: an Ahead handed back after a batch whose
// keys took more than a MiB lets go of them (an idle stream keeps two),
// and keeps the scratch of a small batch for the next.
func TestAheadKeepsNoLargeScratch(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"rp.proto": repeatedProto})
	re := &repeatedEngine{t: t, e: te.E, st: te.St}
	batch := func(n, tagBytes, from int) engine.Batch {
		b := engine.Batch{Op: engine.OpInsert}
		for i := range n {
			d := doc{ID: int64(from + i + 1)}
			for j := range 10 {
				d.Tags = append(d.Tags, fmt.Sprintf("%0*d", tagBytes, j))
			}
			b.Records = append(b.Records, re.rec("rp.Doc", d))
		}
		return b
	}
	a := te.E.NewAhead()
	for _, c := range []struct {
		n, tagBytes int
		kept        bool
	}{{10, 8, true}, {1000, 200, false}, {10, 8, true}} {
		a.Prepare(batch(c.n, c.tagBytes, 0))
		if engine.AheadArenaCap(a) == 0 {
			t.Fatalf("%d records of tags of %d bytes: no arena after Prepare", c.n, c.tagBytes)
		}
		a.Forget()
		if kept := engine.AheadArenaCap(a) > 0; kept != c.kept {
			t.Fatalf("%d records of tags of %d bytes: arena kept %v after Forget, want %v", c.n, c.tagBytes, kept, c.kept)
		}
	}
	// The same through a stream's writer, which takes the Ahead's phase 1
	// and builds the batch: after the large batch, an idle writer keeps
	// no key arena.
	w := te.E.NewWriter()
	defer w.Close()
	next := 0
	for _, c := range []struct {
		n, tagBytes int
		kept        bool
	}{{10, 8, true}, {1000, 200, false}, {10, 8, true}} {
		b := batch(c.n, c.tagBytes, next)
		next += c.n
		b.Ahead = a
		a.Prepare(b)
		if err := w.Apply(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		if engine.AheadsTaken(a) == 0 {
			t.Fatal("the writer took no phase 1 from the Ahead")
		}
		a.Forget()
		if kept := engine.WriterArenaCap(w) > 0; kept != c.kept {
			t.Fatalf("%d records of tags of %d bytes, applied: the writer keeps its key arena %v, want %v", c.n, c.tagBytes, kept, c.kept)
		}
	}
}
