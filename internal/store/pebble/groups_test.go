package pebble

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// operands cuts data into operands of a group as a batch writes them:
// each byte pair a suffix, the low bit of the byte before it the op, the
// run ordered by entryRun; a zero byte ends an operand.
func operands(data []byte) [][]byte {
	var out [][]byte
	var r entryRun
	b := new(pebble.Batch)
	flush := func() {
		if !r.active {
			return
		}
		b.Reset()
		r.flush(b)
		reader := b.Reader()
		_, _, v, ok, err := reader.Next()
		if !ok || err != nil {
			panic("the run wrote no operand")
		}
		out = append(out, bytes.Clone(v))
	}
	for i := 0; i+2 < len(data); i += 3 {
		if data[i] == 0 {
			flush()
			continue
		}
		key := []byte{'g', data[i+1], data[i+2]}
		r.add(key, data[i]&1)
	}
	flush()
	return out
}

// applyModel applies operands, oldest first, to the set of present
// suffixes, and returns what a merge that includes the group's oldest
// operand must give.
func applyModel(ops [][]byte) []byte {
	present := map[string]bool{}
	for _, op := range ops {
		for i := 1; i < len(op); i += memberLen {
			present[string(op[i+1:i+memberLen])] = op[i] == memberPresent
		}
	}
	out := []byte{valueGroup}
	for _, s := range slices.Sorted(maps.Keys(present)) {
		if present[s] {
			out = append(append(out, memberPresent), s...)
		}
	}
	return out
}

// merge merges ops (oldest first) as Pebble would, starting from the
// operand at start and adding older and newer ones around it.
func merge(t *testing.T, ops [][]byte, start int, includesBase bool) []byte {
	t.Helper()
	m, err := groupMerger.Merge(nil, ops[start])
	if err != nil {
		t.Fatal(err)
	}
	for i := start - 1; i >= 0; i-- {
		if err := m.MergeOlder(ops[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range ops[start+1:] {
		if err := m.MergeNewer(op); err != nil {
			t.Fatal(err)
		}
	}
	v, _, err := m.Finish(includesBase)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// FuzzGroupMerge holds the merge of a group's operands to the brute-force
// model, whether Pebble merges them all at once or some first (a merge
// without the oldest keeps removals, and its result merges on), and in
// either of Finish's ways (few operands folded, many sorted). Operands
// that are not a group's value are refused, never a panic.
func FuzzGroupMerge(f *testing.F) {
	f.Add([]byte{1, 0, 1, 1, 0, 2, 0, 0, 0, 0, 0, 1}, uint8(1))
	f.Add(bytes.Repeat([]byte{1, 0, 7, 2, 0, 7, 0, 0, 0}, 12), uint8(5))
	// More operands than a merge folds, each undoing the one before.
	f.Add(bytes.Repeat([]byte{1, 0, 7, 0, 0, 0, 2, 0, 7, 0, 0, 0}, 6), uint8(3))
	f.Add(append(bytes.Repeat([]byte{2, 0, 7, 0, 0, 0, 1, 0, 7, 0, 0, 0}, 6), 1, 9, 9), uint8(11))
	f.Add([]byte{3, 1, 2, 0, 0, 0, 2, 1, 2}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		m, err := groupMerger.Merge(nil, data)
		if err == nil {
			if _, _, err := m.Finish(true); err != nil {
				t.Fatalf("a value Merge took failed to finish: %v", err)
			}
		}
		ops := operands(data)
		if len(ops) == 0 {
			return
		}
		want := applyModel(ops)
		if got := merge(t, ops, len(ops)-1, true); !bytes.Equal(got, want) {
			t.Fatalf("merged %d operands: % x, want % x", len(ops), got, want)
		}
		// Some first, without the oldest, then the result with the rest.
		k := 1 + int(cut)%len(ops)
		if k < len(ops) {
			partial := merge(t, ops[k:], 0, false)
			rest := append(slices.Clone(ops[:k]), partial)
			if got := merge(t, rest, 0, true); !bytes.Equal(got, want) {
				t.Fatalf("merged %d operands, the newest %d first: % x, want % x", len(ops), len(ops)-k, got, want)
			}
		}
	})
}

// BenchmarkMergeMembers merges two operands of 64 members each whose
// suffixes interleave, half of them shared: one fold of a merge.
func BenchmarkMergeMembers(b *testing.B) {
	var older, newer []byte
	for i := range 64 {
		older = append(older, memberPresent, 0, byte(2*i))
		newer = append(newer, memberRemoved, 0, byte(2*i+i%2))
	}
	var dst []byte
	for b.Loop() {
		dst = mergeMembers(dst[:0], older, newer)
	}
}
