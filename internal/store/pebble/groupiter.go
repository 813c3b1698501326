package pebble

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"
)

// sideIter is what Iter positions: a Pebble iterator, or over a grouped
// index instance a groupIter.
type sideIter interface {
	First() bool
	Last() bool
	SeekGE(key []byte) bool
	SeekLT(key []byte) bool
	SeekPrefixGE(key []byte) bool
	Next() bool
	Prev() bool
	Valid() bool
	Key() []byte
	ValueAndErr() ([]byte, error)
	SetBounds(lower, upper []byte)
	Error() error
	Close() error
}

var (
	_ sideIter = (*pebble.Iterator)(nil)
	_ sideIter = (*groupIter)(nil)
)

// groupIter iterates over a grouped index instance (groups.go) as over
// its keys: each group's entries in turn, and the keys set with Set with
// their values as the caller wrote them.
//
// A group's key is its entries' common bytes followed by ff ff, at or
// past every entry in it, and before every entry of a later group; so the
// first Pebble key at or past a seek key k is the group that holds the
// first entry past k, if any group does, or a group whose entries all lie
// before k, which the next key follows. A seek forward is one Pebble
// seek. The caller's lower bound is the Pebble iterator's, as no group
// before it holds an entry past it; its upper bound is not (a group past
// it may hold entries before it) and is checked here.
type groupIter struct {
	it           *pebble.Iterator
	spanUpper    []byte // the index span's upper bound: the Pebble iterator's
	lower, upper []byte // the caller's bounds (nil: none), copied
	bounds       []byte // holds lower and upper

	key     []byte // the current key: a group's entry, or it.Key()
	members []byte // the current group's members (groups.go); nil on a plain key
	at      int    // the current member's offset in members
	value   []byte // the current plain key's value
	valid   bool
	err     error
}

// newGroupIter opens a groupIter over src within [lower, upper), both in
// the index span, which ends at spanUpper.
func newGroupIter(src pebbleIterSource, spanUpper, lower, upper []byte) (*groupIter, error) {
	g := &groupIter{spanUpper: spanUpper}
	g.setBounds(lower, upper)
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: g.lower, UpperBound: spanUpper})
	if err != nil {
		return nil, err
	}
	g.it = it
	return g, nil
}

func (g *groupIter) setBounds(lower, upper []byte) {
	g.bounds = append(append(g.bounds[:0], lower...), upper...)
	g.lower, g.upper = nil, nil
	if lower != nil {
		g.lower = g.bounds[:len(lower):len(lower)]
	}
	if upper != nil {
		g.upper = g.bounds[len(g.bounds)-len(upper):]
	}
	g.valid = false
}

// SetBounds sets [lower, upper) and unpositions the iterator.
func (g *groupIter) SetBounds(lower, upper []byte) {
	g.setBounds(lower, upper)
	g.it.SetBounds(g.lower, g.spanUpper)
}

// load reads the Pebble iterator's key: false for an empty group or a
// value that cannot be read (err is then set).
func (g *groupIter) load() bool {
	v, err := g.it.ValueAndErr()
	if err != nil {
		g.err = err
		return false
	}
	if pv, ok := plainValue(v); ok {
		g.members, g.value = nil, pv
		g.key = append(g.key[:0], g.it.Key()...)
		return true
	}
	if err := checkGroup(v); err != nil || len(g.it.Key()) < suffixLen {
		g.err = fmt.Errorf("key % x: %w", g.it.Key(), errGroupValue)
		return false
	}
	g.members, g.value = v[1:], nil
	return len(g.members) > 0
}

// common returns the current group's entries' common bytes.
func (g *groupIter) common() []byte {
	k := g.it.Key()
	return k[:len(k)-suffixLen]
}

// member makes member i of the current group current.
func (g *groupIter) member(i int) {
	g.at = i * memberLen
	g.key = append(append(g.key[:0], g.common()...), g.members[g.at+1:g.at+memberLen]...)
}

func (g *groupIter) count() int { return len(g.members) / memberLen }

// search returns the first member of the current group at or past key.
func (g *groupIter) search(key []byte) int {
	c := g.common()
	n := min(len(key), len(c))
	switch cmp := bytes.Compare(key[:n], c[:n]); {
	case cmp > 0:
		return g.count()
	case cmp < 0 || len(key) <= len(c):
		return 0 // key sorts before the common bytes, or is a prefix of them
	}
	rest := key[len(c):]
	return sort.Search(g.count(), func(m int) bool {
		return bytes.Compare(g.members[m*memberLen+1:(m+1)*memberLen], rest) >= 0
	})
}

// within checks the current key against the bounds and sets valid.
func (g *groupIter) within() bool {
	g.valid = (g.upper == nil || bytes.Compare(g.key, g.upper) < 0) &&
		(g.lower == nil || bytes.Compare(g.key, g.lower) >= 0)
	return g.valid
}

// forward moves from the Pebble iterator's key on to the first key at or
// past from (nil: the first key) in it or after it.
func (g *groupIter) forward(ok bool, from []byte) bool {
	for ; ok; ok = g.it.Next() {
		if g.load() {
			if g.members == nil {
				return g.within()
			}
			i := 0
			if from != nil {
				i = g.search(from)
			}
			if i < g.count() {
				g.member(i)
				return g.within()
			}
			from = nil // every entry past it lies after this group
			continue
		}
		if g.err != nil {
			break
		}
	}
	g.valid = false
	return false
}

// backward moves from the Pebble iterator's key back to the last key
// before before (nil: the last key) in it or before it.
func (g *groupIter) backward(ok bool, before []byte) bool {
	for ; ok; ok = g.it.Prev() {
		if g.load() {
			if g.members == nil {
				if before == nil || bytes.Compare(g.key, before) < 0 {
					return g.within()
				}
				continue
			}
			i := g.count()
			if before != nil {
				i = g.search(before)
			}
			if i > 0 {
				g.member(i - 1)
				return g.within()
			}
			continue
		}
		if g.err != nil {
			break
		}
	}
	g.valid = false
	return false
}

// First moves to the first key at or above the lower bound.
func (g *groupIter) First() bool { return g.forward(g.it.First(), g.lower) }

// Last moves to the last key below the upper bound.
func (g *groupIter) Last() bool {
	if g.upper != nil {
		return g.SeekLT(g.upper)
	}
	return g.backward(g.it.Last(), nil)
}

// SeekGE moves to the first key >= key.
func (g *groupIter) SeekGE(key []byte) bool {
	if g.lower != nil && bytes.Compare(key, g.lower) < 0 {
		key = g.lower
	}
	return g.forward(g.it.SeekGE(key), key)
}

// SeekLT moves to the last key < key: the group at or past key may hold
// entries before it, so the move starts there.
func (g *groupIter) SeekLT(key []byte) bool {
	if g.upper != nil && bytes.Compare(key, g.upper) > 0 {
		key = g.upper
	}
	if g.it.SeekGE(key) {
		return g.backward(true, key)
	}
	if g.it.Error() != nil {
		g.valid = false
		return false
	}
	return g.backward(g.it.Last(), key)
}

// SeekPrefixGE positions on key if it was set with Set: an entry in a
// group is not found this way (the contract's point reads).
func (g *groupIter) SeekPrefixGE(key []byte) bool {
	g.valid = false
	if !g.it.SeekPrefixGE(key) || !bytes.Equal(g.it.Key(), key) {
		return false
	}
	if !g.load() || g.members != nil {
		return false
	}
	g.valid = true
	return true
}

// Next moves to the next key.
func (g *groupIter) Next() bool {
	if !g.valid {
		return false
	}
	if g.members != nil && g.at+memberLen < len(g.members) {
		g.member(g.at/memberLen + 1)
		return g.within()
	}
	return g.forward(g.it.Next(), nil)
}

// Prev moves to the previous key.
func (g *groupIter) Prev() bool {
	if !g.valid {
		return false
	}
	if g.members != nil && g.at > 0 {
		g.member(g.at/memberLen - 1)
		return g.within()
	}
	return g.backward(g.it.Prev(), nil)
}

func (g *groupIter) Valid() bool { return g.valid }

// Key returns the current key, valid until the next positioning call.
func (g *groupIter) Key() []byte { return g.key }

// ValueAndErr returns the current key's value: empty for an entry.
func (g *groupIter) ValueAndErr() ([]byte, error) {
	if g.members != nil {
		return nil, nil
	}
	return g.value, nil
}

func (g *groupIter) Error() error {
	if g.err != nil {
		return g.err
	}
	return g.it.Error()
}

func (g *groupIter) Close() error { return g.it.Close() }
