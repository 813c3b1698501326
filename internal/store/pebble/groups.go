package pebble

// Entry groups: the index instance keeps the keys written with
// Batch.SetEntry (an index's entries, whose last bytes are the record's
// primary key) in groups, one Pebble key per group: the entry key with
// its last store.EntryGroupSuffix bytes set to ff, whose value lists
// those bytes of every entry in the group. A batch adds and removes
// entries as merge operands (one per run of entries of one group), so it
// never reads.
//
// Why: the cost of an index entry is the cost of a key in the index
// instance. Ten entries a record (an index on a repeated field) are ten
// memtable inserts, ten keys flushed and ten keys rewritten by every
// compaction that takes them; records with rising keys put many entries
// of one value in one group, so a batch writes one operand where it wrote
// tens of keys, and compactions rewrite a few bytes per entry.
//
// Reads see the entries as keys: the index side of an iterator (groupIter)
// expands each group into its entries in key order, which is the order of
// the keys themselves as long as no group's common bytes are a proper
// prefix of another's (the contract asks that of the caller).
//
// Every value in the index span of a grouped instance starts with a byte
// that says what it is:
//
//	00 value...               a key set with Set, and its value
//	01 (op suffix)...          a group: its entries' last bytes in order,
//	                           each after an op, 01 present or 00 removed
//
// A removal is kept while older operands may lie below it (a merge that
// does not include the group's oldest operand); the merge that does
// drops it. A group left without entries keeps its key (Finish says why),
// which reads skip.
//
// The instance's Pebble options name the merger (groupMergerName), which
// Pebble records and checks at every open: an index instance written
// before groups existed names Pebble's default merger, and the store keeps
// writing every key of it on its own (Store.groups false).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/protobase/protobase/internal/store"
)

const (
	// groupMergerName names the merger of a grouped index instance.
	groupMergerName = "protobase.entry-groups.v1"

	valuePlain byte = 0x00
	valueGroup byte = 0x01

	memberRemoved byte = 0x00
	memberPresent byte = 0x01

	suffixLen = store.EntryGroupSuffix
	memberLen = 1 + suffixLen

	// foldUpTo is the most operands a merge applies one after the other;
	// past it, it sorts their members instead, as a read of a group that
	// many batches wrote merges hundreds of operands.
	foldUpTo = 8
)

var errGroupValue = errors.New("store: malformed index entry group")

// groupEnd ends the key of a group: its entries' common bytes and then
// the greatest suffix, so that the group's key is at or past each of its
// entries (see groupIter).
var groupEnd = []byte{0xff, 0xff}

// groupMerger is the index instance's merger in the grouped layout. Its
// mergers come from a pool: a read of a group that many batches wrote
// merges hundreds of operands, and the merged value is handed back with
// the merger as its Closer, which Pebble closes once done with it.
var groupMerger = &pebble.Merger{
	Name: groupMergerName,
	Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		m := mergers.Get().(*groupMerge)
		m.arena, m.older, m.newer, m.order = m.arena[:0], m.older[:0], m.newer[:0], m.order[:0]
		return m, m.MergeNewer(value)
	},
}

var mergers = sync.Pool{New: func() any { return new(groupMerge) }}

// groupMerge merges a group's operands: copies of them in arena, the
// ones added as older and as newer apart, each in the order added.
type groupMerge struct {
	arena        []byte
	older, newer [][2]int // operands' spans in arena, past the value's first byte
	order        [][]byte // the operands, oldest first (Finish)
	a, b, out    []byte   // Finish's scratch and result
	keys         []uint64 // sortMembers' scratch
}

func checkGroup(v []byte) error {
	if len(v) == 0 || v[0] != valueGroup || (len(v)-1)%memberLen != 0 {
		return fmt.Errorf("%w: a value of %d bytes", errGroupValue, len(v))
	}
	return nil
}

func (m *groupMerge) add(to *[][2]int, v []byte) error {
	if err := checkGroup(v); err != nil {
		return err
	}
	*to = append(*to, [2]int{len(m.arena), len(m.arena) + len(v) - 1})
	m.arena = append(m.arena, v[1:]...)
	return nil
}

func (m *groupMerge) MergeNewer(v []byte) error { return m.add(&m.newer, v) }

func (m *groupMerge) MergeOlder(v []byte) error { return m.add(&m.older, v) }

// Finish merges the operands; with the oldest among them, it drops
// removals. A group left empty stays, as a key whose value lists no
// entry, until its index is deleted: Pebble's merge may not delete a key
// whose oldest operand lies below another key's value in the same
// compaction (a merge that ends at a set value and reports the key
// deleted leaves the compaction iterator on that older value).
func (m *groupMerge) Finish(includesBase bool) ([]byte, io.Closer, error) {
	for i := len(m.older) - 1; i >= 0; i-- {
		m.order = append(m.order, m.arena[m.older[i][0]:m.older[i][1]])
	}
	for _, sp := range m.newer {
		m.order = append(m.order, m.arena[sp[0]:sp[1]])
	}
	var members []byte
	switch {
	case len(m.order) == 1:
		members = m.order[0]
	case len(m.order) <= foldUpTo:
		members = m.order[0]
		for _, newer := range m.order[1:] {
			m.a = mergeMembers(m.a[:0], members, newer)
			members, m.a, m.b = m.a, m.b, m.a
		}
	default:
		m.keys, members = sortMembers(m.keys[:0], m.a[:0], m.order)
		m.a = members
	}
	m.out = append(m.out[:0], valueGroup)
	if !includesBase {
		m.out = append(m.out, members...)
	} else {
		for i := 0; i < len(members); i += memberLen {
			if members[i] == memberPresent {
				m.out = append(m.out, members[i:i+memberLen]...)
			}
		}
	}
	return m.out, m, nil
}

// Close returns the merger, and the value Finish returned, to the pool.
func (m *groupMerge) Close() error {
	mergers.Put(m)
	return nil
}

// mergeMembers appends to dst the members of older and newer, two sorted
// lists, newer's op winning for a suffix both hold. A suffix is read as
// one number and a member written byte by byte: the index instance's
// merges and compactions run this for every member of every group.
func mergeMembers(dst, older, newer []byte) []byte {
	_ = [1]struct{}{}[suffixLen-2] // a suffix is read as a uint16
	dst = slices.Grow(dst, len(older)+len(newer))
	for len(older) >= memberLen && len(newer) >= memberLen {
		o, n := uint16(older[1])<<8|uint16(older[2]), uint16(newer[1])<<8|uint16(newer[2])
		if o < n {
			dst, older = append(dst, older[0], older[1], older[2]), older[memberLen:]
			continue
		}
		if o == n {
			older = older[memberLen:]
		}
		dst, newer = append(dst, newer[0], newer[1], newer[2]), newer[memberLen:]
	}
	return append(append(dst, older...), newer...)
}

// sortMembers merges many operands (oldest first) into dst: each member
// becomes a number that sorts by suffix and then newest first, and the
// first of each suffix is kept. keys is scratch; both are returned.
func sortMembers(keys []uint64, dst []byte, ops [][]byte) ([]uint64, []byte) {
	for age, op := range ops {
		newest := uint64(len(ops) - age)
		for i := 0; i < len(op); i += memberLen {
			suffix := uint64(op[i+1])<<8 | uint64(op[i+2])
			keys = append(keys, suffix<<40|newest<<8|uint64(op[i]))
		}
	}
	slices.Sort(keys)
	last := uint64(1) << 63
	for _, k := range keys {
		if suffix := k >> 40; suffix != last {
			last = suffix
			dst = append(dst, byte(k), byte(suffix>>8), byte(suffix))
		}
	}
	return keys, dst
}

// entryRun is the run of entry writes of one group a batch is adding to;
// written as one operand when the batch moves on to another key.
type entryRun struct {
	group   []byte
	members []byte // in write order
	active  bool
}

// add notes op on the entry key; it reports false, taking nothing, when
// key belongs to another group than the run's.
func (r *entryRun) add(key []byte, op byte) bool {
	g := key[:len(key)-suffixLen]
	if r.active && !bytes.Equal(g, r.group) {
		return false
	}
	if !r.active {
		r.group = append(r.group[:0], g...)
		r.members = r.members[:0]
		r.active = true
	}
	r.members = append(r.members, op)
	r.members = append(r.members, key[len(key)-suffixLen:]...)
	return true
}

// flush writes the run to b as one operand and ends it.
func (r *entryRun) flush(b *pebble.Batch) {
	if !r.active {
		return
	}
	r.active = false
	ms := r.members
	if !membersAscend(ms) {
		ms = lastOfEach(ms)
	}
	op := groupOperand(b, r.group, len(ms))
	copy(op.Value[1:], ms)
	_ = op.Finish()
}

// writeGroup writes the entries group+s, for s in suffixes (ascending),
// to b as one operand.
func writeGroup(b *pebble.Batch, group, suffixes []byte) {
	op := groupOperand(b, group, len(suffixes)/suffixLen*memberLen)
	v := op.Value[1:]
	for i := 0; i < len(suffixes); i += suffixLen {
		v[0] = memberPresent
		copy(v[1:memberLen], suffixes[i:i+suffixLen])
		v = v[memberLen:]
	}
	_ = op.Finish()
}

// groupOperand adds to b a merge operand of group's key, with room for
// members bytes of members after the value's first byte, which it sets;
// the caller writes the members and finishes it.
func groupOperand(b *pebble.Batch, group []byte, members int) *pebble.DeferredBatchOp {
	op := b.MergeDeferred(len(group)+suffixLen, 1+members)
	copy(op.Key, group)
	copy(op.Key[len(group):], groupEnd)
	op.Value[0] = valueGroup
	return op
}

func membersAscend(ms []byte) bool {
	for i := memberLen; i < len(ms); i += memberLen {
		if bytes.Compare(ms[i-memberLen+1:i], ms[i+1:i+memberLen]) >= 0 {
			return false
		}
	}
	return true
}

// lastOfEach orders members by suffix, keeping the last written of each:
// each member an operand of its own, merged.
func lastOfEach(ms []byte) []byte {
	ops := make([][]byte, 0, len(ms)/memberLen)
	for i := 0; i < len(ms); i += memberLen {
		ops = append(ops, ms[i:i+memberLen])
	}
	_, out := sortMembers(nil, nil, ops)
	return out
}

// GroupsEntries reports whether the index instance keeps the keys
// written with SetEntry in groups (store.EntryGrouper).
func (s *Store) GroupsEntries() bool { return s.groups }

// plainValue returns the caller's value of a key set with Set in a
// grouped instance; false for a group's value.
func plainValue(v []byte) ([]byte, bool) {
	if len(v) == 0 || v[0] != valuePlain {
		return nil, false
	}
	return v[1:], true
}
