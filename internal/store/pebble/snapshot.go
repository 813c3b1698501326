package pebble

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/protobase/protobase/internal/store"
)

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
	// applyMu (index.go); nil on a store without one. ix is what index
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
	ix := s.index
	if ix == nil {
		return &Snapshot{s: s, snap: s.db.NewSnapshot()}
	}
	if s.readOnly {
		return &Snapshot{s: s, snap: s.db.NewSnapshot(), ix: ix.reader()}
	}
	ix.rlockSettled()
	defer ix.applyMu.RUnlock()
	isnap := ix.db.NewSnapshot()
	return &Snapshot{s: s, snap: s.db.NewSnapshot(), isnap: isnap, ix: isnap}
}

// Get is Reader.Get evaluated at the snapshot.
func (sn *Snapshot) Get(key, dst []byte) (val []byte, found bool, err error) {
	sn.s.mu.RLock()
	defer sn.s.mu.RUnlock()
	if sn.snap == nil || sn.s.closed.Load() {
		return dst[:0], false, ErrClosed
	}
	v, _, found, err := getVersioned(sn.reader(key), sn.s.recs, key, dst)
	return v, found, err
}

// GetVersioned is Store.GetVersioned evaluated at the snapshot.
func (sn *Snapshot) GetVersioned(key, dst []byte) (val []byte, version uint64, found bool, err error) {
	sn.s.mu.RLock()
	defer sn.s.mu.RUnlock()
	if sn.snap == nil || sn.s.closed.Load() {
		return dst[:0], 0, false, ErrClosed
	}
	return getVersioned(sn.reader(key), sn.s.recs, key, dst)
}

// GetLikelyMissing is Store.GetLikelyMissing evaluated at the snapshot.
func (sn *Snapshot) GetLikelyMissing(key, dst []byte) (val []byte, found bool, err error) {
	sn.s.mu.RLock()
	defer sn.s.mu.RUnlock()
	if sn.snap == nil || sn.s.closed.Load() {
		return dst[:0], false, ErrClosed
	}
	return getLikelyMissing(sn.reader(key), sn.s.recs, key, dst)
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
		i, err := newIterPair([2]pebbleIterSource{sn.snap, sn.ix}, sn.s.groups, sn.s.layout, lower, upper, false)
		if err != nil {
			return nil, fmt.Errorf("store: new snapshot iterator: %w", err)
		}
		i.s = sn.s
		i.bound(lower, upper)
		return i, nil
	}
	it, err := sn.snap.NewIter(&pebble.IterOptions{LowerBound: sn.s.layout.pastOwn(lower, upper), UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("store: new snapshot iterator: %w", err)
	}
	i := &Iter{s: sn.s, it: it}
	i.bound(lower, upper)
	return i, nil
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

// OpenSnapshot is NewSnapshot as the contract's ReadSnapshot.
func (s *Store) OpenSnapshot() (store.ReadSnapshot, error) { return s.NewSnapshot(), nil }

// NewIterator is Snapshot.NewIter as the contract's Iterator.
func (sn *Snapshot) NewIterator(lower, upper []byte) (store.Iterator, error) {
	it, err := sn.NewIter(lower, upper)
	if err != nil {
		return nil, err
	}
	return it, nil
}

// reader returns the view of what holds key.
func (sn *Snapshot) reader(key []byte) pebbleReader {
	if sn.ix != nil && sn.s.layout.isIndexKey(key) {
		return sn.ix
	}
	return sn.snap
}
