package engine

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"sort"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// checkGroupBytes bounds the entries' last bytes entryGroups keeps: 8 MiB
// holds 4 M entries, the groups of an index of many values over a few
// million records.
const checkGroupBytes = 8 << 20

// checkGroupsSeen bounds the groups entryGroups remembers having sought
// an entry in once (8 bytes each).
const checkGroupsSeen = 1 << 14

// entryGroups answers whether an entry of a grouped index exists, on a
// store that keeps such entries in groups (store.WriteBatch.SetEntry): a
// point read does not find them, so it seeks them, and a seek through the
// store's iterator merges the group's stored pieces again every time. An
// index of few values keeps its entries in few large groups that every
// record's check meets again; so a group sought a second time is read
// whole, by iteration, and kept (up to checkGroupBytes, then the ones kept
// are dropped), while the groups met once cost a seek.
type entryGroups struct {
	snap       store.ReadSnapshot
	seek, scan store.Iterator // nil until first used
	// read maps a group kept (an entry without its last bytes) to the last
	// bytes of its entries, in order; seen holds the hashes of the groups
	// sought once since it was last cleared.
	read      map[string][]byte
	readBytes int
	seen      map[uint64]struct{}
	seed      maphash.Seed
}

func newEntryGroups(snap store.ReadSnapshot) *entryGroups {
	return &entryGroups{snap: snap, read: map[string][]byte{}, seen: map[uint64]struct{}{}, seed: maphash.MakeSeed()}
}

// has reports whether the entry key exists.
func (g *entryGroups) has(key []byte) (bool, error) {
	if len(key) <= store.EntryGroupSuffix {
		return false, nil
	}
	group := groupOf(key)
	suffix := key[len(group):]
	members, ok := g.read[string(group)]
	if !ok {
		h := maphash.Bytes(g.seed, group)
		if _, again := g.seen[h]; !again {
			if len(g.seen) >= checkGroupsSeen {
				clear(g.seen)
			}
			g.seen[h] = struct{}{}
			return g.seekEntry(key)
		}
		var err error
		if members, err = g.load(group); err != nil {
			return false, err
		}
	}
	const n = store.EntryGroupSuffix
	at := n * sort.Search(len(members)/n, func(m int) bool { return bytes.Compare(members[m*n:(m+1)*n], suffix) >= 0 })
	return at < len(members) && bytes.Equal(members[at:at+n], suffix), nil
}

// seekEntry looks for key with a seek.
func (g *entryGroups) seekEntry(key []byte) (bool, error) {
	if g.seek == nil {
		it, err := g.snap.NewIterator([]byte{checkLayout.ixSpace}, []byte{checkLayout.ixSpace + 1})
		if err != nil {
			return false, fmt.Errorf("check: read index entries: %w", err)
		}
		g.seek = it
	}
	found := g.seek.SeekGE(key) && bytes.Equal(g.seek.Key(), key)
	return found, g.seek.Error()
}

// load reads the entries of group and keeps them, forgetting the groups
// read before when they would pass checkGroupBytes.
func (g *entryGroups) load(group []byte) ([]byte, error) {
	lo, hi := group, keyspace.PrefixEnd(group)
	if g.scan == nil {
		it, err := g.snap.NewIterator(lo, hi)
		if err != nil {
			return nil, fmt.Errorf("check: read index entries: %w", err)
		}
		g.scan = it
	} else {
		g.scan.SetBounds(lo, hi)
	}
	var members []byte
	for ok := g.scan.First(); ok; ok = g.scan.Next() {
		if k := g.scan.Key(); len(k) == len(group)+store.EntryGroupSuffix {
			members = append(members, k[len(group):]...)
		}
	}
	if err := g.scan.Error(); err != nil {
		return nil, fmt.Errorf("check: read index entries: %w", err)
	}
	if g.readBytes+len(members) > checkGroupBytes {
		clear(g.read)
		g.readBytes = 0
	}
	g.readBytes += len(members)
	g.read[string(group)] = members
	return members, nil
}

func (g *entryGroups) close() {
	for _, it := range []store.Iterator{g.seek, g.scan} {
		if it != nil {
			_ = it.Close()
		}
	}
}
