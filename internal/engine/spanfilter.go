package engine

import (
	"bytes"

	"github.com/protobase/protobase/internal/keyspace"
)

// rangedOnly reports whether key is an entry of a non-unique index of the
// current catalog: such entries are only ever ranged over (the writer
// never reads them back, a query scans them), so the store leaves their
// tables without bloom filters (store.SpanFilterer). A unique index's
// entries are read by point lookups (the uniqueness checks), and a key of
// an index the catalog no longer holds keeps its filter. The store calls
// it once per table written, on its own goroutines.
func (e *Engine) rangedOnly(key []byte) bool {
	if len(key) < keyspace.PrefixLen || key[0] != keyspace.TagIndex {
		return false
	}
	cat := e.cat.Load()
	if cat == nil {
		return false
	}
	for _, t := range cat.byID {
		for _, ix := range t.indexes {
			if bytes.Equal(ix.prefix, key[:keyspace.PrefixLen]) {
				return !ix.ix.Unique
			}
		}
	}
	return false
}
