package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/pebble"
)

// TestSortedWalkMatchesGet looks ascending keys up through sortedWalk, as
// index ranges do, and checks every answer against a Get: keys present,
// absent, deleted (tombstones over flushed files), repeated, before the
// first key and past the last, in dense runs (found by stepping) and far
// apart (found by seeking).
func TestSortedWalkMatchesGet(t *testing.T) {
	st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key := func(i int) []byte { return binary.BigEndian.AppendUint32([]byte("r/"), uint32(i)) } //nolint:gosec // small
	rng := rand.New(rand.NewPCG(13, 1))
	const n = 5000
	write := func(set func(b store.WriteBatch)) {
		b := st.NewWriteBatch()
		defer b.Close()
		b.Stamp(1)
		set(b)
		if err := st.ApplyBatch(b); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	// Runs of present keys separated by gaps of every width, so that a
	// lookup finds its key by stepping, past the step bound, by seeking,
	// or (after lookups in a row that sought) by a point read.
	write(func(b store.WriteBatch) {
		for i := 100; i < n; {
			run := 1 + rng.IntN(40)
			for j := i; j < min(i+run, n); j++ {
				b.Set(key(j), []byte(fmt.Sprintf("v%d", j)))
			}
			i += run + rng.IntN(3*walkSteps)
		}
		b.Set(key(n+7), nil) // an empty record is a record
	})
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	write(func(b store.WriteBatch) {
		for range 300 {
			b.Delete(key(rng.IntN(n)))
		}
	})
	snap, err := st.OpenSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	write(func(b store.WriteBatch) { b.Set(key(50), []byte("after the snapshot")) })

	for round := range 200 {
		var keys [][]byte
		for range 1 + rng.IntN(300) {
			i := rng.IntN(n + 20)
			if rng.IntN(4) == 0 && len(keys) > 0 { // a run: the key after the last
				i = int(binary.BigEndian.Uint32(keys[len(keys)-1][2:])) + 1
			}
			keys = append(keys, key(i))
		}
		slices.SortFunc(keys, bytes.Compare)
		it, err := snap.NewIterator(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := sortedWalk{it: it}
		for _, k := range keys {
			got, found, err := w.lookup(k)
			if err != nil {
				t.Fatal(err)
			}
			want, wantFound, err := snap.Get(k, nil)
			if err != nil {
				t.Fatal(err)
			}
			if found != wantFound || !bytes.Equal(got, want) {
				t.Fatalf("round %d: key %x: walk found %v %q, Get %v %q", round, k, found, got, wantFound, want)
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
