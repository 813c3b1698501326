package pebble

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// bitsPerKey is the bloom filters' size: ~1% false positives.
const bitsPerKey = 10

// SetUnfilteredSpans tells the store which spans of the key space are never
// read by point lookups, so that the tables written from then on hold no
// bloom filter for their keys: fn reports it for the span of a table's
// first key (tables end at span boundaries, see Layout.SpanEnd). A
// filter costs a hash of every key at every flush and compaction, and
// only a point lookup (Get, GetLikelyMissing, Iter.Lookup) ever reads it;
// a non-unique index is only ever ranged over. A table without filter
// keys gets a filter that matches every key, so a point lookup that does
// reach one still finds what it holds: a wrong fn costs speed, never a
// wrong answer. nil (the default) filters every table. fn runs on
// Pebble's flush and compaction goroutines, once per table written.
func (s *Store) SetUnfilteredSpans(fn func(key []byte) bool) {
	if fn == nil {
		s.unfiltered.Store(nil)
		return
	}
	s.unfiltered.Store(&fn)
}

// spanFilterPolicy is Pebble's bloom filter policy, except that the tables
// whose span SetUnfilteredSpans names get a filter matching every key. It
// keeps the bloom policy's name, so tables written with either read with
// either.
type spanFilterPolicy struct {
	bloom.FilterPolicy
	s *Store
}

func (p spanFilterPolicy) NewWriter(ft pebble.FilterType) pebble.FilterWriter {
	return &spanFilterWriter{s: p.s, w: p.FilterPolicy.NewWriter(ft)}
}

// spanFilterWriter decides at a table's first key whether to hash its
// keys into a bloom filter.
type spanFilterWriter struct {
	s       *Store
	w       pebble.FilterWriter
	decided bool
	skip    bool
}

func (w *spanFilterWriter) AddKey(key []byte) {
	if !w.decided {
		w.decided = true
		if fn := w.s.unfiltered.Load(); fn != nil {
			w.skip = (*fn)(key)
		}
	}
	if !w.skip {
		w.w.AddKey(key)
	}
}

func (w *spanFilterWriter) Finish(buf []byte) []byte {
	if !w.skip {
		return w.w.Finish(buf)
	}
	return append(buf, matchAllFilter[:]...)
}

// matchAllFilter is a bloom filter, in the format bloom.FilterPolicy
// reads, of one cache line with every bit set and one probe: every key
// may be in the table.
var matchAllFilter = func() (f [64 + 5]byte) {
	for i := range 64 {
		f[i] = 0xff
	}
	f[64] = 1 // probes
	f[65] = 1 // cache lines, 4 bytes little-endian
	return f
}()
