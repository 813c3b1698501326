package pebble

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// A record's version lives in front of its bytes, in the same value:
//
//	00            the format: a versioned record
//	version(8 BE) the commit sequence of the batch that wrote it (Stamp)
//	...           the record's bytes, as the caller wrote them
//
// A record the engine stores has passed validation, and a valid protobuf
// encoding never starts with 00 (its field number would be 0), so a value
// without the header (written before versions existed) is told apart by
// its first byte. Such a value reports the store's floor: the caller's
// last commit sequence when this release first opened the store, recorded
// once (floorSuffix). Every later write has a greater version, and the
// floor is at least 1, since 0 means absent.
//
// A second key per record was the alternative: it costs a write per
// record on every batch and a read per record on every versioned read,
// where the header costs 9 bytes and reads it from the value already read.
const (
	versionFormat = 0x00
	headerLen     = 1 + 8
	// floorSuffix, under the layout's StorePrefix, holds the floor (8
	// bytes BE). It sorts before the index journal, so iterators and range
	// deletions never reach it (keyLayout.mainPart).
	floorSuffix = "floor"
)

// records tells a stored value of a record from its bytes and version,
// and in a grouped index instance an entry's value from its marker
// (groups.go). Immutable after Open.
type records struct {
	lower, upper []byte
	floor        uint64
	// grouped is the layout on a store whose index instance keeps entries
	// in groups; nil otherwise.
	grouped *keyLayout
}

// read is split for a point read of key, which found v: false for a
// group's value, which no key a point read may look for holds.
func (r *records) read(key, v []byte) ([]byte, uint64, bool) {
	if r.grouped != nil && !r.has(key) && r.grouped.isIndexKey(key) {
		v, ok := plainValue(v)
		return v, 0, ok
	}
	v, ver := r.split(key, v)
	return v, ver, true
}

// has reports whether key is a record's, whose value carries a version.
func (r *records) has(key []byte) bool {
	return bytes.Compare(key, r.lower) >= 0 && bytes.Compare(key, r.upper) < 0
}

// split returns the caller's bytes of the value v stored under key, and
// its version: 0 for a key that is not a record's.
func (r *records) split(key, v []byte) ([]byte, uint64) {
	if !r.has(key) {
		return v, 0
	}
	if len(v) >= headerLen && v[0] == versionFormat {
		return v[headerLen:], binary.BigEndian.Uint64(v[1:headerLen])
	}
	return v, r.floor
}

// problem says what is wrong with the header of the value v stored under
// key, "" when nothing is. A value that does not start with the format
// byte was stored before versions and has no header to be wrong.
func (r *records) problem(key, v []byte) string {
	switch {
	case !r.has(key) || len(v) == 0 || v[0] != versionFormat:
		return ""
	case len(v) < headerLen:
		return fmt.Sprintf("the value starts a version header (byte %02x) but holds %d bytes, fewer than the header's %d",
			versionFormat, len(v), headerLen)
	case binary.BigEndian.Uint64(v[1:headerLen]) == 0:
		return "the version header holds version 0, which means absent"
	}
	return ""
}

// recSpan is how an iterator's bounds lie against the record span, so
// that Value compares no key when they lie wholly inside or outside it
// (the engine's iterators read one type's records or one index).
type recSpan uint8

const (
	recMixed recSpan = iota
	recInside
	recOutside
)

// spanOf returns how [lower, upper) (nil: unbounded) lies against r.
func (r *records) spanOf(lower, upper []byte) recSpan {
	switch {
	case lower != nil && upper != nil && bytes.Compare(lower, r.lower) >= 0 && bytes.Compare(upper, r.upper) <= 0:
		return recInside
	case upper != nil && bytes.Compare(upper, r.lower) <= 0, lower != nil && bytes.Compare(lower, r.upper) >= 0:
		return recOutside
	}
	return recMixed
}

// splitIn is split for a key read within bounds that lie as sp says.
func (r *records) splitIn(sp recSpan, key, v []byte) []byte {
	switch sp {
	case recOutside:
		return v
	case recInside:
		if len(v) >= headerLen && v[0] == versionFormat {
			return v[headerLen:]
		}
		return v
	}
	v, _ = r.split(key, v)
	return v
}

// putHeader writes the header of a record at version into dst, which holds
// headerLen bytes.
func putHeader(dst []byte, version uint64) {
	dst[0] = versionFormat
	binary.BigEndian.PutUint64(dst[1:headerLen], version)
}

// openRecords reads the floor, or on the first open of a store by this
// release sets it from the caller's position: synced, before any write, so
// that a crash cannot leave a later floor than the first open saw. A
// read-only store computes it without writing.
func (s *Store) openRecords(readOnly bool) error {
	kl := s.layout
	s.recs = &records{lower: kl.recLower, upper: kl.recUpper}
	if s.groups {
		s.recs.grouped = kl
	}
	v, found, err := get(s.db, kl.floor, nil)
	if err != nil {
		return err
	}
	if found {
		if len(v) != 8 {
			return fmt.Errorf("store: open: the record version floor holds %d bytes, not 8", len(v))
		}
		s.recs.floor = binary.BigEndian.Uint64(v)
		return nil
	}
	pos, found, err := get(s.db, kl.position, nil)
	if err != nil {
		return err
	}
	floor := uint64(1)
	if found && len(pos) == 8 {
		floor = max(floor, binary.BigEndian.Uint64(pos))
	}
	s.recs.floor = floor
	if readOnly {
		return nil
	}
	if err := s.db.Set(kl.floor, binary.BigEndian.AppendUint64(nil, floor), pebble.Sync); err != nil {
		return fmt.Errorf("store: open: record the version floor: %w", err)
	}
	return nil
}
