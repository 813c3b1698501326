package engine

import (
	"bytes"
	"hash/maphash"
	"slices"

	"github.com/protobase/protobase/internal/store"
)

// A batch of records with ten elements each in an index on a repeated
// field writes ten entries a record, which a store that keeps entries in
// groups (store.WriteBatch.SetEntries) keeps as one write per group: the
// entries that differ only in their last store.EntryGroupSuffix bytes.
// Records with rising keys put a batch's entries of one value in one
// group, so a batch of a thousand records of ten tags drawn from a
// thousand holds about a thousand groups of ten.
//
// putGroups hands the store each group at once, in key order, without
// ordering the entries themselves: it finds each entry's group by hash,
// orders the groups (a tenth as many as the entries), and within a group
// the entries come in batch order, which for rising keys is their order
// (a group whose entries are not is ordered by its suffixes alone). That
// costs about half what ordering every entry and writing each on its own
// costs. Records with scattered keys make each entry a group of its own:
// then the groups cost what the entries would, and their table 16 to 32
// bytes an entry more.

// groupScratch is putGroups' scratch, kept by the writer. The groups
// themselves are sortedEntrys in Writer.sorted, so that sortEntries
// orders them: a group's head and first entry's key (the group is all of
// it but the suffix), and in v where its entries lie in members (v.s,
// and v.e of them).
type groupScratch struct {
	slots    []uint64 // a hash's top half and a group's position + 1; 0 empty
	of       []int32  // each entry's group
	keys     []span   // the entries, in batch order
	members  []int32  // the entries' positions in keys, by group
	suffixes []byte   // one group's suffixes
	sort     []uint16 // orderSuffixes' scratch
	last     int      // the groups of the last batch
	// names holds the groups found so far one after another, and ends
	// where each ends: find compares an entry with a group here, in a few
	// KiB of its own, rather than in the first entry's key, somewhere in
	// the batch's arena.
	names []byte
	ends  []int32
}

// putGroups writes the batch's entries in the j-th index of their types
// as groups (SetEntries), and reports whether it did: only when every
// such index is grouped.
func (w *Writer) putGroups(b store.WriteBatch, j int, skip int) bool {
	g := &w.groups
	g.keys = g.keys[:0]
	for i := range w.preps {
		p := &w.preps[i]
		if j >= len(p.t.indexes) {
			continue
		}
		if !p.t.indexes[j].grouped {
			return false
		}
		g.keys = append(g.keys, w.entries(p, j)...)
	}
	g.bucket(w, skip)
	// Ordered by their first entries' keys, the groups are in the order of
	// their entries.
	w.sortEntries(skip)
	for _, gr := range w.sorted {
		g.suffixes = g.suffixes[:0]
		for _, m := range g.members[gr.v.s : gr.v.s+gr.v.e] {
			k := w.bytes(g.keys[m])
			g.suffixes = append(g.suffixes, k[len(k)-store.EntryGroupSuffix:]...)
		}
		g.orderSuffixes()
		b.SetEntries(groupOf(w.bytes(gr.k)), g.suffixes)
	}
	return true
}

// trim drops the scratch a batch of many entries grew past what an idle
// stream keeps (maxKeptArena).
func (g *groupScratch) trim() {
	if 8*(cap(g.slots)+cap(g.keys))+4*(cap(g.of)+cap(g.members)) > maxKeptArena {
		*g = groupScratch{}
	}
}

// groupOf returns the group of entry key k: all of it but its suffix.
func groupOf(k []byte) []byte { return k[:len(k)-store.EntryGroupSuffix] }

// bucket finds the group of each of g.keys, filling w.sorted with the
// groups (in order of first entry) and g.members with each group's
// entries in batch order.
//
// The table of groups is open-addressed, each slot a group's position + 1
// beside the top half of its hash, so that most probes that miss read no
// group and no key. It starts at twice the last batch's groups (a
// stream's batches are mostly alike) and doubles when half full: sized
// for the entries, it would be ten times as large for a batch of ten tags
// a record and stay in no cache.
func (g *groupScratch) bucket(w *Writer, skip int) {
	size := 16
	for size < 2*g.last {
		size *= 2
	}
	w.sorted, g.of = w.sorted[:0], g.of[:0]
	g.names, g.ends = g.names[:0], g.ends[:0]
	g.resize(w.seed, size)
	for _, k := range g.keys {
		grp := groupOf(w.bytes(k))
		h := maphash.Bytes(w.seed, grp)
		s := g.find(grp, h)
		if s < 0 {
			if 2*(len(w.sorted)+1) > len(g.slots) {
				g.resize(w.seed, 2*len(g.slots))
			}
			hi, lo := keyHead(grp[skip:])
			w.sorted = append(w.sorted, sortedEntry{hi: hi, lo: lo, k: k})
			g.names = append(g.names, grp...)
			g.ends = append(g.ends, int32(len(g.names))) //nolint:gosec // bounded by the batch
			s = int32(len(w.sorted) - 1)                 //nolint:gosec // at most one group an entry, bounded by the batch
			g.place(h, s)
		}
		w.sorted[s].v.e++
		g.of = append(g.of, s)
	}
	g.last = len(w.sorted)
	if cap(g.names) > maxKeptArena {
		g.names = nil // a batch of long values; an idle stream keeps no such scratch
	}
	var at int32
	for i := range w.sorted {
		v := &w.sorted[i].v
		v.s, at, v.e = at, at+v.e, 0
	}
	g.members = slices.Grow(g.members[:0], len(g.keys))[:len(g.keys)]
	for e, s := range g.of {
		v := &w.sorted[s].v
		g.members[v.s+v.e] = int32(e) //nolint:gosec // bounded by the batch
		v.e++
	}
}

// name returns group s's bytes.
func (g *groupScratch) name(s int32) []byte {
	start := int32(0)
	if s > 0 {
		start = g.ends[s-1]
	}
	return g.names[start:g.ends[s]]
}

// find returns the position of group grp, of hash h, in w.sorted, or -1.
func (g *groupScratch) find(grp []byte, h uint64) int32 {
	mask := uint64(len(g.slots) - 1)
	for at := h & mask; ; at = (at + 1) & mask {
		sl := g.slots[at]
		if sl == 0 {
			return -1
		}
		if sl>>32 != h>>32 {
			continue
		}
		if s := int32(sl&(1<<32-1)) - 1; bytes.Equal(g.name(s), grp) { //nolint:gosec // a position + 1
			return s
		}
	}
}

// place puts group s, of hash h, in the table.
func (g *groupScratch) place(h uint64, s int32) {
	mask := uint64(len(g.slots) - 1)
	at := h & mask
	for g.slots[at] != 0 {
		at = (at + 1) & mask
	}
	g.slots[at] = h>>32<<32 | uint64(s+1) //nolint:gosec // s is a position
}

// resize empties the table to size slots and places the groups found so
// far, hashing them again.
func (g *groupScratch) resize(seed maphash.Seed, size int) {
	if cap(g.slots) < size {
		g.slots = make([]uint64, size)
	} else {
		g.slots = g.slots[:size]
		clear(g.slots)
	}
	for i := range g.ends {
		g.place(maphash.Bytes(seed, g.name(int32(i))), int32(i)) //nolint:gosec // bounded by the batch
	}
}

// orderSuffixes orders a group's suffixes (distinct, each
// store.EntryGroupSuffix bytes), in place, unless they already are.
func (g *groupScratch) orderSuffixes() {
	const n = store.EntryGroupSuffix
	s := g.suffixes
	_ = [1]struct{}{}[n-2] // the suffixes are read as uint16s
	ordered := true
	for i := n; i < len(s); i += n {
		if bytes.Compare(s[i-n:i], s[i:i+n]) > 0 {
			ordered = false
			break
		}
	}
	if ordered {
		return
	}
	vs := g.sort[:0]
	for i := 0; i < len(s); i += n {
		vs = append(vs, uint16(s[i])<<8|uint16(s[i+1]))
	}
	slices.Sort(vs)
	g.sort = vs
	for i, v := range vs {
		s[2*i], s[2*i+1] = byte(v>>8), byte(v)
	}
}
