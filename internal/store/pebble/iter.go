package pebble

import (
	"bytes"
	"fmt"
)

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
	it   sideIter
	pair *iterPair
	// span is how the bounds lie against the record span (version.go).
	span recSpan
}

// bound notes how [lower, upper) lies against the record span.
func (i *Iter) bound(lower, upper []byte) { i.span = i.s.recs.spanOf(lower, upper) }

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
	v, _ = i.s.recs.split(key, v)
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
//
// On a record's key it is the caller's bytes, a slice of the stored value
// past its version header (version.go): nothing is copied.
func (i *Iter) Value() []byte {
	v, err := i.it.ValueAndErr()
	if err != nil {
		return nil
	}
	return i.s.recs.splitIn(i.span, i.it.Key(), v)
}

// Version returns the version of the record the iterator is on, or that
// the last Lookup found (the iterator is left on it): 0 off a record's
// key, when not positioned, or when the value cannot be read.
func (i *Iter) Version() uint64 {
	if !i.Valid() {
		return 0
	}
	v, err := i.it.ValueAndErr()
	if err != nil {
		return 0
	}
	_, ver := i.s.recs.split(i.it.Key(), v)
	return ver
}

// HeaderProblem says what is wrong with the version header of the record
// the iterator is on (store.HeaderChecker): "" when nothing is, off a
// record's key, when not positioned, or when the value cannot be read
// (Error says why).
func (i *Iter) HeaderProblem() string {
	if !i.Valid() {
		return ""
	}
	v, err := i.it.ValueAndErr()
	if err != nil {
		return ""
	}
	return i.s.recs.problem(i.it.Key(), v)
}

// SetBounds changes the iterator's bounds to [lower, upper) (copied) and
// unpositions it; call First, Last or a seek next. Reusing an iterator this
// way is cheaper than creating a new one, and keeps its point-in-time view.
func (i *Iter) SetBounds(lower, upper []byte) {
	i.bound(lower, upper)
	if i.pair != nil {
		i.pair.setBounds(lower, upper)
		i.it = nil
		return
	}
	i.it.SetBounds(i.s.layout.pastOwn(lower, upper), upper)
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

// Prefetch does nothing: a Lookup through a Pebble iterator is already a
// local seek.
func (i *Iter) Prefetch([][]byte) error { return nil }
