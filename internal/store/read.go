package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
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
	v, closer, err := r.Get(key)
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			return dst[:0], false, nil
		}
		return dst[:0], false, fmt.Errorf("store: get: %w", err)
	}
	dst = append(dst[:0], v...)
	if err := closer.Close(); err != nil {
		return dst[:0], false, fmt.Errorf("store: get: %w", err)
	}
	return dst, true, nil
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
func getLikelyMissing(r pebbleIterSource, key, dst []byte) ([]byte, bool, error) {
	it, err := r.NewIter(&probeOptions)
	if err != nil {
		return dst[:0], false, fmt.Errorf("store: get: %w", err)
	}
	found := it.SeekPrefixGE(key) && bytes.Equal(it.Key(), key)
	if found {
		var v []byte
		v, err = it.ValueAndErr()
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
	return get(s.reader(key), key, dst)
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
	return getLikelyMissing(s.reader(key), key, dst)
}

// NewIter returns an iterator over the current state of keys in
// [lower, upper) (nil bound: unbounded). The iterator sees a consistent
// point-in-time view fixed at creation; later writes are invisible to it.
func (s *Store) NewIter(lower, upper []byte) (*Iter, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if t := s.tier; t != nil {
		// Both views are opened together, so that they see the same
		// batches (tier.go).
		t.applyMu.RLock()
		i, err := newIterPair([2]pebbleIterSource{s.db, t.reader()}, lower, upper, true)
		t.applyMu.RUnlock()
		if err != nil {
			return nil, fmt.Errorf("store: new iterator: %w", err)
		}
		i.s = s
		return i, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("store: new iterator: %w", err)
	}
	return &Iter{s: s, it: it}, nil
}

// Snapshot is a consistent, read-only, point-in-time view of the store:
// batches applied after NewSnapshot are invisible to it. It implements Reader.
//
// Get and NewIter are safe for concurrent use; Close must not run
// concurrently with them. A snapshot pins old data versions (blocking their
// compaction), so close it promptly. Close is required.
type Snapshot struct {
	s    *Store
	snap *pebble.Snapshot
	// isnap is the index instance's snapshot, taken with snap under
	// applyMu (tier.go); nil on a store without one. ix is what index
	// reads read: isnap, or on a read-only store the index instance's
	// reader, which does not change.
	isnap *pebble.Snapshot
	ix    pebbleReader
}

// NewSnapshot returns a snapshot of the current applied state. On a closed
// store it returns a snapshot whose methods return ErrClosed.
func (s *Store) NewSnapshot() *Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return &Snapshot{s: s}
	}
	t := s.tier
	if t == nil {
		return &Snapshot{s: s, snap: s.db.NewSnapshot()}
	}
	if s.readOnly {
		return &Snapshot{s: s, snap: s.db.NewSnapshot(), ix: t.reader()}
	}
	t.applyMu.RLock()
	defer t.applyMu.RUnlock()
	isnap := t.db.NewSnapshot()
	return &Snapshot{s: s, snap: s.db.NewSnapshot(), isnap: isnap, ix: isnap}
}

// Get is Reader.Get evaluated at the snapshot.
func (sn *Snapshot) Get(key, dst []byte) (val []byte, found bool, err error) {
	sn.s.mu.RLock()
	defer sn.s.mu.RUnlock()
	if sn.snap == nil || sn.s.closed.Load() {
		return dst[:0], false, ErrClosed
	}
	return get(sn.reader(key), key, dst)
}

// GetLikelyMissing is Store.GetLikelyMissing evaluated at the snapshot.
func (sn *Snapshot) GetLikelyMissing(key, dst []byte) (val []byte, found bool, err error) {
	sn.s.mu.RLock()
	defer sn.s.mu.RUnlock()
	if sn.snap == nil || sn.s.closed.Load() {
		return dst[:0], false, ErrClosed
	}
	return getLikelyMissing(sn.reader(key), key, dst)
}

// NewIter is Reader.NewIter evaluated at the snapshot.
func (sn *Snapshot) NewIter(lower, upper []byte) (*Iter, error) {
	sn.s.mu.RLock()
	defer sn.s.mu.RUnlock()
	if sn.snap == nil || sn.s.closed.Load() {
		return nil, ErrClosed
	}
	if sn.ix != nil {
		// The two snapshots are already of the same batches: the sides
		// open when first read.
		i, err := newIterPair([2]pebbleIterSource{sn.snap, sn.ix}, lower, upper, false)
		if err != nil {
			return nil, fmt.Errorf("store: new snapshot iterator: %w", err)
		}
		i.s = sn.s
		return i, nil
	}
	it, err := sn.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("store: new snapshot iterator: %w", err)
	}
	return &Iter{s: sn.s, it: it}, nil
}

// Close releases the snapshot. It is idempotent, and a no-op after the store
// is closed (the store's Close already reported the leak).
func (sn *Snapshot) Close() error {
	sn.s.mu.RLock()
	defer sn.s.mu.RUnlock()
	snap, isnap := sn.snap, sn.isnap
	sn.snap, sn.isnap, sn.ix = nil, nil, nil
	if snap == nil || sn.s.closed.Load() {
		return nil
	}
	if isnap != nil {
		if err := isnap.Close(); err != nil {
			_ = snap.Close()
			return fmt.Errorf("store: close snapshot: %w", err)
		}
	}
	if err := snap.Close(); err != nil {
		return fmt.Errorf("store: close snapshot: %w", err)
	}
	return nil
}

// Iter iterates over a bounded key range of a Store or Snapshot in key order.
// It sees a fixed point-in-time view. It is not safe for concurrent use, and
// it must be closed before the store is closed: calling its methods after
// Store.Close is undefined, except Close, which is then a no-op. After
// Iter.Close only Close and Error may be called.
//
// Positioning methods (First, Last, SeekGE, SeekLT, Next, Prev) return
// whether the iterator is now on a key (same as Valid). Key and Value return
// slices owned by the iterator that are valid only until the next
// positioning call or Close; copy them to keep them. When Valid returns false
// check Error to tell exhaustion from failure.
type Iter struct {
	s *Store
	// it is the positioned Pebble iterator: the only one, or on a store
	// with an index instance the current side of pair (nil until a
	// positioning call).
	it   *pebble.Iterator
	pair *iterPair
}

// First moves to the first key at or above the lower bound.
func (i *Iter) First() bool {
	if i.pair != nil {
		return i.pair.first(i)
	}
	return i.it.First()
}

// Last moves to the last key below the upper bound.
func (i *Iter) Last() bool {
	if i.pair != nil {
		return i.pair.last(i)
	}
	return i.it.Last()
}

// SeekGE moves to the first key >= key (clamped to the bounds).
func (i *Iter) SeekGE(key []byte) bool {
	if i.pair != nil {
		return i.pair.seekGE(i, key)
	}
	return i.it.SeekGE(key)
}

// SeekLT moves to the last key < key (clamped to the bounds).
func (i *Iter) SeekLT(key []byte) bool {
	if i.pair != nil {
		return i.pair.seekLT(i, key)
	}
	return i.it.SeekLT(key)
}

// Lookup is a point read through the iterator: it appends the value of key
// to dst[:0] and reports whether key exists in the iterator's view. It
// leaves the iterator positioned arbitrarily.
//
// Many lookups through one iterator cost much less than as many Gets: Get
// builds a fresh iterator stack over every level per call, while a reused
// iterator keeps its per-level sstable iterators open and only re-seeks
// them (SeekPrefixGE, which with the default comparer matches the whole
// key and uses the bloom filters).
func (i *Iter) Lookup(key, dst []byte) ([]byte, bool, error) {
	if i.pair != nil && i.pair.lookup(i, key) == nil {
		return dst[:0], false, i.Error()
	}
	if !i.it.SeekPrefixGE(key) || !bytes.Equal(i.it.Key(), key) {
		if err := i.it.Error(); err != nil {
			return dst[:0], false, fmt.Errorf("store: get: %w", err)
		}
		return dst[:0], false, nil
	}
	v, err := i.it.ValueAndErr()
	if err != nil {
		return dst[:0], false, fmt.Errorf("store: get: %w", err)
	}
	return append(dst[:0], v...), true, nil
}

// Next moves to the next key.
func (i *Iter) Next() bool {
	if i.pair != nil {
		return i.pair.step(i, false)
	}
	return i.it.Next()
}

// Prev moves to the previous key.
func (i *Iter) Prev() bool {
	if i.pair != nil {
		return i.pair.step(i, true)
	}
	return i.it.Prev()
}

// Valid reports whether the iterator is positioned on a key.
func (i *Iter) Valid() bool { return i.it != nil && i.it.Valid() }

// Key returns the current key; valid until the next positioning call.
func (i *Iter) Key() []byte { return i.it.Key() }

// Value returns the current value; valid until the next positioning call.
// If the value cannot be read, Value returns nil, the iterator becomes
// invalid and Error reports the failure.
func (i *Iter) Value() []byte {
	v, err := i.it.ValueAndErr()
	if err != nil {
		return nil
	}
	return v
}

// SetBounds changes the iterator's bounds to [lower, upper) (copied) and
// unpositions it; call First, Last or a seek next. Reusing an iterator this
// way is cheaper than creating a new one, and keeps its point-in-time view.
func (i *Iter) SetBounds(lower, upper []byte) {
	if i.pair != nil {
		i.pair.setBounds(lower, upper)
		i.it = nil
		return
	}
	i.it.SetBounds(lower, upper)
}

// Error returns the error, if any, that stopped the iteration.
func (i *Iter) Error() error {
	if i.pair != nil {
		if err := i.pair.error(); err != nil {
			return fmt.Errorf("store: iterate: %w", err)
		}
		return nil
	}
	if i.it == nil {
		return nil
	}
	if err := i.it.Error(); err != nil {
		return fmt.Errorf("store: iterate: %w", err)
	}
	return nil
}

// Close releases the iterator and returns its accumulated error, if any. It
// is idempotent.
func (i *Iter) Close() error {
	it, p := i.it, i.pair
	if it == nil && p == nil {
		return nil
	}
	i.it, i.pair = nil, nil
	i.s.mu.RLock()
	defer i.s.mu.RUnlock()
	if i.s.closed.Load() {
		// Pebble's Close already reported the leak; touching the iterator now
		// could reach into freed DB state.
		return nil
	}
	var err error
	if p != nil {
		err = p.close() // it is one of p's
	} else {
		err = it.Close()
	}
	if err != nil {
		return fmt.Errorf("store: close iterator: %w", err)
	}
	return nil
}

// pebbleReader is what a read reads: an instance, a snapshot of one, or
// the overlay of a read-only store's unapplied index journal (tier.go).
type pebbleReader interface {
	pebbleGetter
	pebbleIterSource
}

// reader returns what holds key.
func (s *Store) reader(key []byte) pebbleReader {
	if s.tier != nil && isIndexKey(key) {
		return s.tier.reader()
	}
	return s.db
}

// reader returns the view of what holds key.
func (sn *Snapshot) reader(key []byte) pebbleReader {
	if sn.ix != nil && isIndexKey(key) {
		return sn.ix
	}
	return sn.snap
}
