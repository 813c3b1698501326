package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"

	"github.com/protobase/protobase/internal/store"
)

// Reader is the read interface shared by Store (the latest committed state)
// and Snapshot (a fixed point in time).
type Reader interface {
	// Get appends the value stored under key to dst[:0] and returns it with
	// found=true. If key is absent it returns dst[:0], false, nil. The
	// returned slice is owned by the caller.
	Get(key, dst []byte) (val []byte, found bool, err error)
	// GetLikelyMissing is Get optimized for keys that are usually absent: it
	// checks bloom filters on every level (see Store.GetLikelyMissing).
	GetLikelyMissing(key, dst []byte) (val []byte, found bool, err error)
	// NewIter returns an unpositioned iterator over keys in [lower, upper);
	// a nil bound means unbounded on that side. The bounds are copied. The
	// iterator must be closed.
	NewIter(lower, upper []byte) (*Iter, error)
}

var (
	_ Reader = (*Store)(nil)
	_ Reader = (*Snapshot)(nil)
)

// pebbleGetter is implemented by *pebble.DB and *pebble.Snapshot.
type pebbleGetter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// get copies the value for key into dst[:0] and releases Pebble's resources
// before returning, so nothing leaks and nothing allocates beyond dst growth.
func get(r pebbleGetter, key, dst []byte) ([]byte, bool, error) {
	v, _, found, err := getVersioned(r, nil, key, dst)
	return v, found, err
}

// getVersioned is get of the caller's bytes and the version of a record
// (recs nil: no key is a record's).
func getVersioned(r pebbleGetter, recs *records, key, dst []byte) ([]byte, uint64, bool, error) {
	v, closer, err := r.Get(key)
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			return dst[:0], 0, false, nil
		}
		return dst[:0], 0, false, fmt.Errorf("store: get: %w", err)
	}
	var ver uint64
	found := true
	if recs != nil {
		v, ver, found = recs.read(key, v)
	}
	dst = append(dst[:0], v...)
	if err := closer.Close(); err != nil {
		return dst[:0], 0, false, fmt.Errorf("store: get: %w", err)
	}
	if !found {
		return dst[:0], 0, false, nil
	}
	return dst, ver, true, nil
}

// pebbleIterSource is implemented by *pebble.DB and *pebble.Snapshot.
type pebbleIterSource interface {
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// probeOptions makes SeekPrefixGE consult the bloom filters of every level,
// including L6, which Pebble's Get path always skips.
var probeOptions = pebble.IterOptions{UseL6Filters: true}

// getLikelyMissing is get through a prefix iterator that checks bloom filters
// on all levels. With Pebble's default comparer the "prefix" is the whole
// key, so SeekPrefixGE finds exactly key or nothing.
func getLikelyMissing(r pebbleIterSource, recs *records, key, dst []byte) ([]byte, bool, error) {
	it, err := r.NewIter(&probeOptions)
	if err != nil {
		return dst[:0], false, fmt.Errorf("store: get: %w", err)
	}
	found := it.SeekPrefixGE(key) && bytes.Equal(it.Key(), key)
	if found {
		var v []byte
		v, err = it.ValueAndErr()
		v, _, found = recs.read(key, v)
		dst = append(dst[:0], v...)
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return dst[:0], false, fmt.Errorf("store: get: %w", err)
	}
	if !found {
		return dst[:0], false, nil
	}
	return dst, true, nil
}

// Get appends the latest committed (applied) value of key to dst[:0]. It
// returns dst[:0], false, nil if the key is absent. Data from applied but not
// yet durable batches is visible (see the package doc).
//
// Get is the fastest path when the key usually exists. It uses bloom filters
// on levels L0-L5 only: Pebble's point-get path never reads L6 filter blocks,
// and L6 holds most of a mature store's data, so a missing key typically
// costs one L6 index+data block read. For keys that are usually absent
// (uniqueness checks, existence probes on insert), use GetLikelyMissing.
func (s *Store) Get(key, dst []byte) (val []byte, found bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return dst[:0], false, ErrClosed
	}
	v, _, found, err := getVersioned(s.reader(key), s.recs, key, dst)
	return v, found, err
}

// GetVersioned is Get that also returns the record's version (the
// contract's Record versions; 0 for a key outside the layout's
// RecordSpan).
func (s *Store) GetVersioned(key, dst []byte) (val []byte, version uint64, found bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return dst[:0], 0, false, ErrClosed
	}
	return getVersioned(s.reader(key), s.recs, key, dst)
}

// GetLikelyMissing is Get tuned for keys that are probably absent: it
// consults the bloom filters of every level, including L6, so a miss
// normally reads no data block at all, only filter blocks (about 1.25 bytes
// per key, which the block cache keeps hot). It positions a full merging
// iterator, so it costs more CPU than Get: when the data blocks are cached
// anyway (a store smaller than the block cache) Get is faster even for
// misses. The win is avoiding a data block read per miss in stores larger
// than the cache.
func (s *Store) GetLikelyMissing(key, dst []byte) (val []byte, found bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return dst[:0], false, ErrClosed
	}
	return getLikelyMissing(s.reader(key), s.recs, key, dst)
}

// NewIter returns an iterator over the current state of keys in
// [lower, upper) (nil bound: unbounded). The iterator sees a consistent
// point-in-time view fixed at creation; later writes are invisible to it.
func (s *Store) NewIter(lower, upper []byte) (*Iter, error) {
	return s.newIter(lower, upper, s.index != nil)
}

// newIter is NewIter over both instances, or with both false over the
// main one alone: for a range that holds no index key, which need not
// settle the index instance (indexhold.go).
func (s *Store) newIter(lower, upper []byte, both bool) (*Iter, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if ix := s.index; both {
		// Both views are opened together, so that they see the same
		// batches (index.go).
		ix.rlockSettled()
		i, err := newIterPair([2]pebbleIterSource{s.db, ix.reader()}, s.groups, s.layout, lower, upper, true)
		ix.applyMu.RUnlock()
		if err != nil {
			return nil, fmt.Errorf("store: new iterator: %w", err)
		}
		i.s = s
		i.bound(lower, upper)
		return i, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: s.layout.pastOwn(lower, upper), UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("store: new iterator: %w", err)
	}
	i := &Iter{s: s, it: it}
	i.bound(lower, upper)
	return i, nil
}

// NewIterator is NewIter as the contract's Iterator.
func (s *Store) NewIterator(lower, upper []byte) (store.Iterator, error) {
	it, err := s.NewIter(lower, upper)
	if err != nil {
		return nil, err
	}
	return it, nil
}

// pebbleReader is what a read reads: an instance, a snapshot of one, or
// the overlay of a read-only store's unapplied index journal (index.go).
type pebbleReader interface {
	pebbleGetter
	pebbleIterSource
}

// reader returns what holds key.
func (s *Store) reader(key []byte) pebbleReader {
	if s.index != nil && s.layout.isIndexKey(key) {
		s.index.settle()
		return s.index.reader()
	}
	return s.db
}
