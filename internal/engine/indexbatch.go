package engine

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/store"
)

// indexBatch bounds the index entries whose records scanIndex looks up
// together, and indexBatchBytes the record bytes a batch should hold.
// indexFirstBatch is the first batch of a query that may stop early.
const (
	indexBatch      = 1024
	indexBatchBytes = 1 << 20
	indexFirstBatch = 16
)

// walkSteps bounds the Next calls a sorted lookup makes from the last
// record found before it seeks instead: a step within a data block costs
// a fraction of a seek, a walk past a few dozen absent keys more than one.
const walkSteps = 8

// indexBatchBuf holds a batch of index entries, the record keys they point
// to and, once looked up, the records. Offsets, not slices, mark each
// entry's bytes, as the buffers move while they grow. It is reused from
// batch to batch by one cursor.
type indexBatchBuf struct {
	keys  []byte // entry keys, back to back
	rks   []byte // record keys, back to back
	vals  []byte // records, back to back
	ents  []indexEntry
	order []orderKey // the entries by record key, once sorted
	pre   [][]byte   // record keys to Prefetch, on a Shared store
}

// indexBatches pools the batches of the cursors of index ranges, which
// are made per query; a batch is back in the pool once its cursor's run
// ends (the records it emitted are valid only during emit).
var indexBatches = sync.Pool{New: func() any { return new(indexBatchBuf) }}

// indexEntry is one entry of a batch: its key keys[k0:k1], its record key
// rks[rk0:rk1] and its record vals[v0:v1] when found.
type indexEntry struct {
	k0, k1, rk0, rk1, v0, v1 int
	found                    bool
	ver                      uint64 // the record's version, when the query asks
}

// orderKey places entry i in record-key order: hi and lo are the first 16
// bytes of its primary key, big-endian and zero padded, so that most
// comparisons need neither bytes.Compare nor a look at the entry.
type orderKey struct {
	hi, lo uint64
	i      int32
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
	hi, lo := keyHead(pk)
	b.order = append(b.order, orderKey{hi: hi, lo: lo, i: int32(len(b.ents))}) //nolint:gosec // at most indexBatch
	b.ents = append(b.ents, en)
}

// rk returns entry i's record key.
func (b *indexBatchBuf) rk(i int32) []byte {
	en := &b.ents[i]
	return b.rks[en.rk0:en.rk1]
}

// sort orders b.order by record key. The record keys of one index share
// their type prefix, so the heads decide almost every comparison.
func (b *indexBatchBuf) sort() {
	slices.SortFunc(b.order, func(x, y orderKey) int {
		if c := cmp.Compare(x.hi, y.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(x.lo, y.lo); c != 0 {
			return c
		}
		return bytes.Compare(b.rk(x.i), b.rk(y.i))
	})
}

// entry returns entry i's key and record, and whether the record exists.
func (b *indexBatchBuf) entry(i int) (key, rec []byte, found bool) {
	en := &b.ents[i]
	return b.keys[en.k0:en.k1], b.vals[en.v0:en.v1], en.found
}

// keep stores the record of entry i and its version.
func (b *indexBatchBuf) keep(i int32, val []byte, found bool, ver uint64) {
	en := &b.ents[i]
	en.found, en.ver = found, ver
	en.v0 = len(b.vals)
	b.vals = append(b.vals, val...)
	en.v1 = len(b.vals)
}

// scanIndex walks the current iterator over index entries and emits, in
// the index's order, the records they point to.
//
// It reads the entries in batches and looks each batch's records up in
// record-key order, through one second iterator on the same reader (a Get
// per record would build an iterator stack over every level each time):
// see lookupBatch. A query that may stop early (a limit, a page) starts
// with small batches, so that it reads few records it does not send, and
// doubles them up to indexBatch; any other reads full batches from the
// start. Batches stay within about indexBatchBytes of records.
func (cu *cursor) scanIndex(ctx context.Context, emit func(key, rec []byte) bool) (bool, error) {
	p := cu.c.plan
	it := cu.it
	if cu.rit == nil {
		var err error
		if cu.rit, err = cu.r.NewIterator(nil, nil); err != nil {
			return false, err
		}
	}
	ok := cu.start()
	if cu.ib == nil {
		cu.ib = indexBatches.Get().(*indexBatchBuf)
	}
	b := cu.ib
	size := indexBatch
	if cu.want > 0 || p.Limit > 0 {
		size = indexFirstBatch
	}
	for ok {
		if p.Limit > 0 && p.Filter == nil {
			size = max(1, min(size, int(min(p.Limit-cu.n, indexBatch)))) //nolint:gosec // bounded by indexBatch
		}
		b.reset()
		for ; ok && len(b.ents) < size; ok = cu.step() {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			key := it.Key()
			pk, err := p.PKFromIndexEntry(key, it.Value())
			if err != nil {
				return false, &apierror.Error{Code: apierror.Internal, Msg: "index entry unreadable: " + err.Error(), Err: err}
			}
			b.add(key, cu.c.t.prefix, pk)
		}
		if err := it.Error(); err != nil {
			return false, err
		}
		if err := cu.lookupBatch(b); err != nil {
			return false, err
		}
		for i := range b.ents {
			key, rec, found := b.entry(i)
			if !found {
				continue // entry of a record removed after the entry was read: not possible on a snapshot, harmless
			}
			if p.Repeats {
				seen, err := cu.seenEarlier(key, b.rk(int32(i)), rec) //nolint:gosec // at most indexBatch
				if err != nil {
					return false, err
				}
				if seen {
					continue // a result at its earlier entry
				}
			}
			cu.read++
			cu.ver = b.ents[i].ver
			if more, err := cu.match(ctx, key, rec, emit); err != nil || !more {
				return false, err
			}
		}
		size = min(2*size, indexBatch)
		if len(b.vals) > 0 {
			size = max(1, min(size, indexBatchBytes*len(b.ents)/len(b.vals)))
		}
	}
	return true, nil
}

// lookupBatch reads the records of b's entries in record-key order.
//
// The entries of an index range point at records scattered over the key
// space; in key order each lookup moves forward from the last. On a local
// store the lookups walk: from the record last found, the next is often a
// few keys on (records whose index values are close were often written
// together), and Next reaches it for a fraction of a seek; a key further
// away is sought, and Pebble continues such a seek from its position
// (TrySeekUsingNext) instead of descending the level again. When the
// records are scattered (an index on tags, or on values that arrive in
// random order) the walk turns to point reads (see sortedWalk). On a
// Shared store, whose reads cross a network, the batch's records are
// fetched together first (Iterator.Prefetch: a few requests, not one per
// record).
func (cu *cursor) lookupBatch(b *indexBatchBuf) error {
	b.sort()
	if cu.e.st.Shared() {
		return cu.lookupFetched(b)
	}
	w := sortedWalk{it: cu.rit, buf: cu.buf}
	defer func() { cu.buf = w.buf }() // the point reads' buffer, for the next batch
	for _, o := range b.order {
		val, found, err := w.lookup(b.rk(o.i))
		if err != nil {
			return err
		}
		var ver uint64
		if found && cu.wantVer {
			ver = cu.rit.Version()
		}
		b.keep(o.i, val, found, ver)
	}
	return nil
}

// lookupFetched is lookupBatch for a Shared store.
func (cu *cursor) lookupFetched(b *indexBatchBuf) error {
	b.pre = b.pre[:0]
	for _, o := range b.order {
		b.pre = append(b.pre, b.rk(o.i))
	}
	if err := cu.rit.Prefetch(b.pre); err != nil {
		return err
	}
	for _, o := range b.order {
		val, found, err := cu.rit.Lookup(b.rk(o.i), cu.buf[:0])
		cu.buf = val
		if err != nil {
			return err
		}
		var ver uint64
		if found && cu.wantVer {
			ver = cu.rit.Version()
		}
		b.keep(o.i, val, found, ver)
	}
	clear(b.pre) // the pooled batch should not keep the keys' buffer alive through them
	return nil
}

// sortedWalk looks up keys given in ascending order through one
// iterator. Between lookups the iterator rests on the first key at or
// after the last key looked up (or is exhausted): every key between the
// two is absent, which is what lets a later key be found by stepping on.
//
// Stepping pays only while the keys are close. A seek that stepping could
// not spare descends every level of the store, where a point read
// (Iterator.Lookup) passes over the levels whose bloom filters rule the key
// out: twice as fast for records scattered over a store larger than a
// memtable. After pointAfter lookups in a row that had to seek, the walk
// makes point reads for the rest of its keys.
type sortedWalk struct {
	it         store.Iterator
	positioned bool
	seeks      int    // lookups in a row that sought
	buf        []byte // the value of the last point read
}

// pointAfter is how many lookups in a row must seek before a sortedWalk
// turns to point reads: one seek may be a gap between runs of close
// records, two in a row rarely are.
const pointAfter = 2

// lookup returns the value of key, valid until the next call, and
// whether key exists. key must not sort before the last key looked up.
func (w *sortedWalk) lookup(key []byte) ([]byte, bool, error) {
	if w.seeks >= pointAfter {
		var found bool
		var err error
		w.buf, found, err = w.it.Lookup(key, w.buf[:0])
		return w.buf, found, err
	}
	it := w.it
	valid := false
	switch {
	case !w.positioned:
		w.positioned = true
		w.seeks++
		valid = it.SeekGE(key)
	case !it.Valid():
		return nil, false, it.Error() // exhausted: no key at or after the last one
	default:
		valid = true
		c := bytes.Compare(it.Key(), key)
		for steps := 0; c < 0 && steps < walkSteps && valid; steps++ {
			if valid = it.Next(); valid {
				c = bytes.Compare(it.Key(), key)
			}
		}
		if valid && c < 0 {
			w.seeks++
			valid = it.SeekGE(key)
		} else {
			w.seeks = 0
		}
	}
	if !valid || !bytes.Equal(it.Key(), key) {
		return nil, false, it.Error()
	}
	v := it.Value()
	if v == nil {
		if err := it.Error(); err != nil {
			return nil, false, err
		}
	}
	return v, true, nil
}
