package store

import (
	"context"
	"errors"
)

// The methods by which the Pebble store satisfies the storage contract
// (contract.go). They add no allocation: an *Iter, *Snapshot or *Batch
// fits an interface value as it is.

// NewIterator is NewIter as the contract's Iterator.
func (s *Store) NewIterator(lower, upper []byte) (Iterator, error) {
	it, err := s.NewIter(lower, upper)
	if err != nil {
		return nil, err
	}
	return it, nil
}

// OpenSnapshot is NewSnapshot as the contract's ReadSnapshot.
func (s *Store) OpenSnapshot() (ReadSnapshot, error) { return s.NewSnapshot(), nil }

// NewWriteBatch is NewBatch as the contract's WriteBatch.
func (s *Store) NewWriteBatch() WriteBatch { return s.NewBatch() }

// ApplyBatch is Apply for a batch made by NewWriteBatch. It never returns
// ErrConflict: see the contract's note on Pebble's preconditions.
func (s *Store) ApplyBatch(b WriteBatch) error {
	pb, ok := b.(*Batch)
	if !ok {
		return errors.New("store: ApplyBatch of a batch of another store")
	}
	return s.Apply(pb)
}

// NewIterator is Snapshot.NewIter as the contract's Iterator.
func (sn *Snapshot) NewIterator(lower, upper []byte) (Iterator, error) {
	it, err := sn.NewIter(lower, upper)
	if err != nil {
		return nil, err
	}
	return it, nil
}

// Read is a read of the latest state. It records no precondition: the
// engine reads and applies under its write lock in the only process that
// holds the directory, so nothing can change in between.
func (b *Batch) Read(key, dst []byte, likelyMissing bool) ([]byte, bool, error) {
	if likelyMissing {
		return b.s.GetLikelyMissing(key, dst)
	}
	return b.s.Get(key, dst)
}

// ReadAbsent reports whether the latest state holds no key in
// [lower, upper), with one iterator probe. Like Read, it records nothing.
func (b *Batch) ReadAbsent(lower, upper []byte) (bool, error) {
	it, err := b.s.NewIter(lower, upper)
	if err != nil {
		return false, err
	}
	found := it.First()
	if err := it.Error(); err != nil {
		it.Close()
		return false, err
	}
	return !found, it.Close()
}

// Prefetch does nothing: a Lookup through a Pebble iterator is already a
// local seek.
func (i *Iter) Prefetch([][]byte) error { return nil }

// Expect records nothing, as Read does.
func (b *Batch) Expect([]byte, int64) {}

// Shared is false: one process holds the directory.
func (s *Store) Shared() bool { return false }

// GetVersion is Get with version 0: no other process writes the store.
func (s *Store) GetVersion(key, dst []byte) ([]byte, int64, bool, error) {
	v, found, err := s.Get(key, dst)
	return v, 0, found, err
}

// Watch returns at once: every change is this process's own.
func (s *Store) Watch(context.Context, []byte, func()) {}

// Position is 0: Pebble batches are numbered by the engine.
func (b *Batch) Position() uint64 { return 0 }
