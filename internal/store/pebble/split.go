package pebble

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"
)

// SplitKeys returns up to n-1 keys strictly inside (start, end) that cut the
// range into parts of roughly equal on-disk size, for reading the parts
// concurrently. The cut points are sstable boundaries, so they cost no
// reads; data still in memtables is not seen, and a range that lives
// entirely in one table or in memory gets no split (one part).
func (s *Store) SplitKeys(start, end []byte, n int) ([][]byte, error) {
	if n <= 1 {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	levels, err := s.db.SSTables(pebble.WithKeyRangeFilter(start, end))
	if err != nil {
		return nil, fmt.Errorf("store: list tables: %w", err)
	}
	if lo, hi, ok := s.layout.indexPart(start, end); ok && s.index != nil {
		ix, err := s.index.db.SSTables(pebble.WithKeyRangeFilter(lo, hi))
		if err != nil {
			return nil, fmt.Errorf("store: list tables: %w", err)
		}
		levels = append(levels, ix...)
	}
	type cut struct {
		key  []byte
		size uint64
	}
	var cuts []cut
	var total uint64
	for _, level := range levels {
		for _, t := range level {
			k := t.Largest.UserKey
			if bytes.Compare(k, start) <= 0 || (end != nil && bytes.Compare(k, end) >= 0) {
				total += t.Size
				continue
			}
			cuts = append(cuts, cut{key: append([]byte(nil), k...), size: t.Size})
			total += t.Size
		}
	}
	if len(cuts) == 0 || total == 0 {
		return nil, nil
	}
	sort.Slice(cuts, func(i, j int) bool { return bytes.Compare(cuts[i].key, cuts[j].key) < 0 })
	// Walk the cut points in key order, taking one each time the
	// accumulated size passes the next quantile. A table's bytes count as
	// lying before its largest key, which is exact for non-overlapping
	// levels and a fair estimate for L0.
	var out [][]byte
	var acc uint64
	step := total / uint64(n)
	next := step
	for _, c := range cuts {
		acc += c.size
		if acc >= next && len(out) < n-1 {
			if len(out) == 0 || !bytes.Equal(out[len(out)-1], c.key) {
				// Start the next part just after the boundary key.
				out = append(out, append(c.key, 0))
			}
			for next <= acc {
				next += step
			}
		}
	}
	return out, nil
}
