package storetest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/store"
)

var entriesSeed = flag.Uint64("store.entries.seed", 0, "seed of the Entries conformance test (0: from the clock)")

// entryModel is what the store must hold: the keys and values written,
// by key.
type entryModel map[string]string

func (m entryModel) sorted() []string { return slices.Sorted(maps.Keys(m)) }

// entryKeys draws the keys of the test: entries of two indexes written
// with SetEntry (elements of several lengths, each a prefix of another,
// and integer primary keys that straddle group boundaries), and keys set
// with values in a third index, among them.
type entryKeys struct {
	r *rand.Rand
}

var entryElements = []string{"", "a", "ab", "abc", "b", "\x00", "ba"}

func (k entryKeys) entry() []byte {
	ix := uint32(7 + k.r.IntN(2))
	key := keyspace.AppendIndexPrefix(nil, ix)
	key = orderedcode.AppendString(key, entryElements[k.r.IntN(len(entryElements))])
	// Near the boundaries of groups (65,536 keys each) and across them.
	pk := int64(k.r.IntN(4))<<16 + int64(k.r.IntN(24)) - 12
	return orderedcode.AppendInt(key, pk)
}

func (k entryKeys) plain() []byte {
	key := keyspace.AppendIndexPrefix(nil, 9)
	return orderedcode.AppendString(key, entryElements[k.r.IntN(len(entryElements))])
}

// bound draws an iteration bound or seek key: an entry, a cut of one
// (inside a group, or an element's prefix), or one past it.
func (k entryKeys) bound() []byte {
	e := k.entry()
	switch k.r.IntN(4) {
	case 0:
		return e[:k.r.IntN(len(e)+1)]
	case 1:
		return append(e, 0)
	case 2:
		return k.plain()
	}
	return e
}

// testEntries holds keys written with SetEntry, SetEntries and DeleteEntry to what
// Set and Delete of the same keys would leave, over random batches:
// iterations both ways within random bounds, seeks, direction changes,
// snapshots, point reads of the keys set with Set, and range deletions of
// a whole index, through flushes and compactions.
func testEntries(t *testing.T, b Backend) {
	seed := *entriesSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-store.entries.seed)", seed)
	kv := b.Open(t)
	r := rand.New(rand.NewPCG(seed, 7))
	keys := entryKeys{r: r}
	model := entryModel{}
	// A store that keeps every key on its own (etcd, whose reads are
	// round trips) needs few rounds to show it; grouping stores many.
	rounds, bounds := 60, 20
	if b.SharedWriters {
		rounds, bounds = 6, 4
	}
	if testing.Short() {
		rounds = (rounds + 1) / 2
	}
	for round := range rounds {
		var snap store.ReadSnapshot
		var before entryModel
		if round%5 == 2 {
			var err error
			if snap, err = kv.OpenSnapshot(); err != nil {
				t.Fatal(err)
			}
			before = maps.Clone(model)
		}
		commit(t, kv, func(w store.WriteBatch) { writeEntries(w, keys, model, 1+r.IntN(200)) })
		if r.IntN(8) == 0 {
			if err := kv.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if r.IntN(16) == 0 {
			if err := kv.Compact(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		checkEntries(t, fmt.Sprintf("seed %d round %d", seed, round), kv, keys, model, bounds)
		if snap != nil {
			checkEntries(t, fmt.Sprintf("seed %d round %d, snapshot", seed, round), snap, keys, before, bounds)
			if err := snap.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// writeEntries adds n random writes to w and to the model, or now and
// then the deletion of an index's whole span, in a batch of its own (etcd
// takes no write to a range a batch deletes).
func writeEntries(w store.WriteBatch, keys entryKeys, model entryModel, n int) {
	r := keys.r
	if r.IntN(20) == 0 {
		p := keyspace.AppendIndexPrefix(nil, uint32(7+r.IntN(2)))
		w.DeleteRange(p, keyspace.PrefixEnd(p))
		for k := range model {
			if bytes.HasPrefix([]byte(k), p) {
				delete(model, k)
			}
		}
		return
	}
	var run []byte // entries in a row, ascending, as an index's writes come
	for range n {
		switch op := r.IntN(11); {
		case op == 10:
			setEntries(w, keys, model)
		case op < 6:
			if run == nil || r.IntN(4) == 0 {
				run = keys.entry()
			} else {
				run = bytes.Clone(run)
				run[len(run)-1]++
			}
			if r.IntN(3) == 0 {
				w.DeleteEntry(run)
				delete(model, string(run))
			} else {
				w.SetEntry(run)
				model[string(run)] = ""
			}
		case op < 8:
			k := keys.plain()
			v := fmt.Sprintf("v%d", r.IntN(1000))
			w.Set(k, []byte(v))
			model[string(k)] = v
		default:
			k := keys.plain()
			w.Delete(k)
			delete(model, string(k))
		}
	}
}

// setEntries writes a group's entries at once: a random entry's group
// and a few of its suffixes, ascending.
func setEntries(w store.WriteBatch, keys entryKeys, model entryModel) {
	const n = store.EntryGroupSuffix
	e := keys.entry()
	group := e[:len(e)-n]
	var suffixes []byte
	for _, s := range slices.Sorted(maps.Keys(map[uint16]bool{uint16(keys.r.IntN(1 << 16)): true, uint16(keys.r.IntN(40)): true, uint16(keys.r.IntN(40)): true})) {
		suffixes = append(suffixes, byte(s>>8), byte(s))
		model[string(group)+string(suffixes[len(suffixes)-n:])] = ""
	}
	w.SetEntries(group, suffixes)
}

// checkEntries compares v with the model, and its reads within random
// bounds, as many as bounds says.
func checkEntries(t *testing.T, at string, v store.View, keys entryKeys, model entryModel, bounds int) {
	t.Helper()
	all := model.sorted()
	lo, hi := keyspace.AppendIndexPrefix(nil, 7), keyspace.AppendIndexPrefix(nil, 10)
	it, err := v.NewIterator(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	entriesEqual(t, at+": First..Next", walk(it, it.First(), false), kvs(model, all))
	entriesEqual(t, at+": Last..Prev", walk(it, it.Last(), true), kvs(model, reversed(all)))
	for range bounds {
		l, u := keys.bound(), keys.bound()
		if bytes.Compare(l, u) > 0 {
			l, u = u, l
		}
		it.SetBounds(l, u)
		in := within(all, l, u)
		what := fmt.Sprintf("%s: [% x, % x)", at, l, u)
		entriesEqual(t, what+" forward", walk(it, it.First(), false), kvs(model, in))
		entriesEqual(t, what+" backward", walk(it, it.Last(), true), kvs(model, reversed(in)))
		k := keys.bound()
		ge := within(in, k, nil)
		entriesEqual(t, fmt.Sprintf("%s SeekGE(% x)", what, k), walk(it, it.SeekGE(k), false), kvs(model, ge))
		lt := within(in, nil, k)
		entriesEqual(t, fmt.Sprintf("%s SeekLT(% x)", what, k), walk(it, it.SeekLT(k), true), kvs(model, reversed(lt)))
		// A step back after a step forward lands where it started.
		if it.SeekGE(k) && it.Next() {
			want := string(it.Key())
			if !it.Prev() || !it.Next() || string(it.Key()) != want {
				t.Errorf("%s: SeekGE(% x) Next Prev Next at % x, want % x", what, k, it.Key(), want)
			}
		}
	}
	for _, k := range all {
		if !bytes.HasPrefix([]byte(k), keyspace.AppendIndexPrefix(nil, 9)) {
			continue
		}
		if got, found := mustGet(t, v, k); !found || got != model[k] {
			t.Errorf("%s: Get(% x) = %q, %v, want %q", at, k, got, found, model[k])
		}
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// within returns the keys of sorted in [lower, upper) (nil: no bound).
func within(sorted []string, lower, upper []byte) []string {
	var out []string
	for _, k := range sorted {
		if (lower == nil || k >= string(lower)) && (upper == nil || k < string(upper)) {
			out = append(out, k)
		}
	}
	return out
}

func kvs(model entryModel, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%x=%s", k, model[k])
	}
	return out
}

// walk collects key=value from the iterator's position on.
func walk(it store.Iterator, ok, reverse bool) []string {
	var out []string
	for ; ok; ok = step(it, reverse) {
		out = append(out, fmt.Sprintf("%x=%s", it.Key(), it.Value()))
	}
	if err := it.Error(); err != nil {
		out = append(out, "error: "+err.Error())
	}
	return out
}

func entriesEqual(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %d keys %q\nwant %d keys %q", what, len(got), got, len(want), want)
	}
}
