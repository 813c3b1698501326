package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Layout is what the store is told of the key space its caller writes:
// the store parses no key itself. internal/keyspace's Layout is the
// engine's, which the server opens every store with. A store must be
// opened with the layout it was written with: its index instance holds
// the keys IndexSpan named then, and its own keys lie under StorePrefix.
type Layout interface {
	// IndexSpan returns the span [lower, upper) of the keys the index
	// instance holds (index.go): the index entries, whose level 0 is
	// worth merging in tiers.
	IndexSpan() (lower, upper []byte)
	// StorePrefix returns the prefix of the store's own keys in the main
	// instance (see keyLayout); every key the caller writes sorts after every
	// key that starts with it.
	StorePrefix() []byte
	// SpanEnd returns the exclusive end of the span of the key space key
	// falls in (nil: the rest of the key space), a span being a region
	// that grows on its own: the store ends its tables there (see
	// pebbleOptions).
	SpanEnd(key []byte) []byte
	// Bounds returns a range [lower, upper) that holds every key the
	// caller writes and the store's own: what Compact compacts.
	Bounds() (lower, upper []byte)
	// KnownKeys returns keys of which every store the caller has used
	// holds one: a Pebble directory without the MarkerFile that holds one
	// is a store made before the marker existed (marker.go).
	KnownKeys() [][]byte
	// RecordSpan returns the span [lower, upper) of the keys whose values
	// are records: the store keeps each one's version in front of its
	// bytes (version.go). It lies outside the index span.
	RecordSpan() (lower, upper []byte)
	// PositionKey returns the key under which the caller keeps its last
	// commit sequence (8 bytes big-endian): a store made before versions
	// existed gives its records that version (version.go).
	PositionKey() []byte
}

// keyLayout is the layout as Open reads it, once: which instance holds a
// key, and the store's own keys. Immutable.
//
// The store's own keys sit in the main instance under the layout's
// StorePrefix, before every key of the caller's, where the store's
// iterators and range deletions never reach:
//
//	prefix "floor"             the version of records stored without one
//	                           (version.go), 8 bytes BE
//	prefix "index"             present in a store with an index instance
//	prefix "ixlog/" n(8 BE)    index journal entry n: one batch's index
//	                           writes, the index instance's batch encoded
//
// The mark refuses a store whose index directory went missing instead of
// reading it without its index entries; the journal sorts before every
// other key, beside only the caller's keys that rarely change, so that
// compacting it never takes the newest tables of the rest with it.
type keyLayout struct {
	// indexLower and indexUpper bound the keys the index instance holds.
	indexLower, indexUpper []byte
	// mark is the key of a store with an index instance.
	mark []byte
	// journal starts the index journal's keys, and journalEnd ends them:
	// iterators and range deletions begin past it (mainPart).
	journal, journalEnd []byte
	// spanEnd, lower, upper and known are the layout's SpanEnd, Bounds and
	// KnownKeys.
	spanEnd      func(key []byte) []byte
	lower, upper []byte
	known        [][]byte
	// recLower and recUpper bound the record keys (RecordSpan); floor is
	// the key of the version floor, position the caller's PositionKey.
	recLower, recUpper []byte
	floor, position    []byte
}

// The store's own keys under the layout's StorePrefix.
const (
	markSuffix    = "index"
	journalSuffix = "ixlog/"
)

// newKeyLayout reads l.
func newKeyLayout(l Layout) (*keyLayout, error) {
	if l == nil {
		return nil, errors.New("store: open: Options.Layout is nil: the store must be told which keys its index instance holds")
	}
	kl := &keyLayout{spanEnd: l.SpanEnd, known: l.KnownKeys()}
	kl.indexLower, kl.indexUpper = l.IndexSpan()
	kl.lower, kl.upper = l.Bounds()
	prefix := l.StorePrefix()
	kl.mark = append(bytes.Clone(prefix), markSuffix...)
	kl.journal = append(bytes.Clone(prefix), journalSuffix...)
	kl.journalEnd = prefixEnd(kl.journal)
	kl.floor = append(bytes.Clone(prefix), floorSuffix...)
	kl.recLower, kl.recUpper = l.RecordSpan()
	kl.position = l.PositionKey()
	switch {
	case len(prefix) == 0:
		return nil, errors.New("store: open: the layout's StorePrefix is empty")
	case bytes.Compare(kl.indexLower, kl.indexUpper) >= 0:
		return nil, errors.New("store: open: the layout's index span is empty")
	case kl.isIndexKey(appliedKey) || kl.isIndexKey(kl.mark) || kl.isIndexKey(kl.journal) || kl.isIndexKey(kl.floor):
		return nil, errors.New("store: open: the layout's index span holds the store's own keys")
	case bytes.Compare(kl.recLower, kl.recUpper) >= 0:
		return nil, errors.New("store: open: the layout's record span is empty")
	case bytes.Compare(kl.recLower, kl.indexUpper) < 0 && bytes.Compare(kl.indexLower, kl.recUpper) < 0:
		return nil, errors.New("store: open: the layout's record span overlaps its index span")
	case bytes.Compare(kl.recLower, kl.journalEnd) < 0:
		return nil, errors.New("store: open: the layout's record span holds the store's own keys")
	case len(kl.position) == 0:
		return nil, errors.New("store: open: the layout's PositionKey is empty")
	}
	return kl, nil
}

// isIndexKey reports whether key belongs to the index instance.
func (kl *keyLayout) isIndexKey(key []byte) bool {
	return bytes.Compare(key, kl.indexLower) >= 0 && bytes.Compare(key, kl.indexUpper) < 0
}

// holdsGroup reports whether every key that starts with group belongs to
// the index instance.
func (kl *keyLayout) holdsGroup(group []byte) bool {
	return len(group) > 0 && kl.isIndexKey(group) && !bytes.HasPrefix(kl.indexUpper, group)
}

// indexPart returns the part of the range [start, end) (end nil: no end)
// that the index instance holds; ok is false when there is none. The same
// cut serves a range with an inclusive end.
func (kl *keyLayout) indexPart(start, end []byte) (lo, hi []byte, ok bool) {
	lo, hi = start, end
	if bytes.Compare(lo, kl.indexLower) < 0 {
		lo = kl.indexLower
	}
	if hi == nil || bytes.Compare(hi, kl.indexUpper) > 0 {
		hi = kl.indexUpper
	}
	return lo, hi, bytes.Compare(lo, hi) < 0
}

// mainPart returns where the part of the range [start, end) (end nil: no
// end) that the main instance serves begins: past the store's own keys
// (the mark and the journal, not the caller's to read or delete); ok is
// false when nothing of the range is left there. The range keeps its end:
// the main instance holds no index entry, so one reaching over the index
// span needs no cut.
func (kl *keyLayout) mainPart(start, end []byte) (lo []byte, ok bool) {
	lo = start
	if bytes.Compare(lo, kl.journalEnd) < 0 {
		lo = kl.journalEnd
	}
	if end == nil {
		return lo, true
	}
	return lo, bytes.Compare(lo, end) < 0 && (bytes.Compare(lo, kl.indexLower) < 0 || bytes.Compare(end, kl.indexUpper) > 0)
}

// pastOwn returns the lower bound of a range [lower, upper) of the main
// instance moved past the store's own keys, which a single-instance store
// has too (the version floor): upper itself when the range holds none of
// the caller's keys.
func (kl *keyLayout) pastOwn(lower, upper []byte) []byte {
	switch {
	case bytes.Compare(lower, kl.journalEnd) >= 0:
		return lower
	case upper != nil && bytes.Compare(upper, kl.journalEnd) < 0:
		return upper
	}
	return kl.journalEnd
}

// tableEnd returns where the table that starts at key must end: the
// store's own keys are two spans of their own, the mark and the journal,
// and the layout cuts the rest.
func (kl *keyLayout) tableEnd(key []byte) []byte {
	switch {
	case bytes.Compare(key, kl.journal) < 0:
		return kl.journal
	case bytes.HasPrefix(key, kl.journal):
		return kl.journalEnd
	}
	return kl.spanEnd(key)
}

// journalKey appends the journal key of entry n: the numbers sort in the
// keys' order.
func (kl *keyLayout) journalKey(dst []byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, kl.journal...), n)
}

// journalEntry returns the number of a journal key; ok is false when key
// is not one.
func (kl *keyLayout) journalEntry(key []byte) (n uint64, ok bool) {
	if len(key) != len(kl.journal)+8 || !bytes.HasPrefix(key, kl.journal) {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(kl.journal):]), true
}

// prefixEnd returns the shortest key greater than every key that starts
// with prefix, nil when there is none (prefix empty or all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
