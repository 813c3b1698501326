package engine

import (
	"bytes"
	"cmp"
	"slices"
	"sync"
)

// indexBatch bounds the index entries whose records scanIndex looks up
// together, and indexBatchBytes the record bytes a batch should hold.
const (
	indexBatch      = 256
	indexBatchBytes = 1 << 20
)

// indexBatchBuf holds a batch of index entries, the record keys they point
// to and, once looked up, the records. Offsets, not slices, mark each
// entry's bytes, as the buffers move while they grow. It is reused from
// batch to batch by one cursor.
type indexBatchBuf struct {
	keys  []byte // entry keys, back to back
	rks   []byte // record keys, back to back
	vals  []byte // records, back to back
	ents  []indexEntry
	order []int32 // positions in ents by record key
}

// indexBatches pools the batches of the cursors of index ranges, which
// are made per query; a batch is back in the pool once its cursor's run
// ends (the records it emitted are valid only during emit).
var indexBatches = sync.Pool{New: func() any { return new(indexBatchBuf) }}

// indexEntry is one entry of a batch: its key keys[k0:k1], its record key
// rks[rk0:rk1] (whose first 16 bytes after the type prefix are hi and lo,
// big-endian and zero padded, so that most comparisons need no
// bytes.Compare) and its record vals[v0:v1] when found.
type indexEntry struct {
	k0, k1, rk0, rk1, v0, v1 int
	hi, lo                   uint64
	found                    bool
}

func (b *indexBatchBuf) reset() {
	b.keys, b.rks, b.vals = b.keys[:0], b.rks[:0], b.vals[:0]
	b.ents, b.order = b.ents[:0], b.order[:0]
}

// add appends an entry of key pointing at the record key prefix+pk.
func (b *indexBatchBuf) add(key, prefix, pk []byte) {
	en := indexEntry{k0: len(b.keys), rk0: len(b.rks)}
	b.keys = append(b.keys, key...)
	b.rks = append(append(b.rks, prefix...), pk...)
	en.k1, en.rk1 = len(b.keys), len(b.rks)
	en.hi, en.lo = keyHead(pk)
	b.order = append(b.order, int32(len(b.ents))) //nolint:gosec // at most indexBatch
	b.ents = append(b.ents, en)
}

// sort orders b.order by record key. The record keys of one index share
// their type prefix, so the heads decide almost every comparison.
func (b *indexBatchBuf) sort() {
	slices.SortFunc(b.order, func(i, j int32) int {
		x, y := &b.ents[i], &b.ents[j]
		if c := cmp.Compare(x.hi, y.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(x.lo, y.lo); c != 0 {
			return c
		}
		return bytes.Compare(b.rks[x.rk0:x.rk1], b.rks[y.rk0:y.rk1])
	})
}

// entry returns entry i's key and record, and whether the record exists.
func (b *indexBatchBuf) entry(i int) (key, rec []byte, found bool) {
	en := &b.ents[i]
	return b.keys[en.k0:en.k1], b.vals[en.v0:en.v1], en.found
}
