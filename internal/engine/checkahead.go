package engine

import (
	"fmt"

	"github.com/protobase/protobase/internal/store"
)

// checkAhead is how many keys of a pass the checker looks ahead over on a
// Shared store, prefetching the point reads they will make. There each
// point read is a round trip to the cluster, and a pass makes one per
// record and index (records pass) or per entry (entries pass): tens of
// thousands of records took minutes one read at a time.
const checkAhead = 1024

// The reads one prefetch holds are bounded in number and, roughly, in
// bytes. checkAheadReads: a record of an index on a repeated field reads
// up to MaxIndexEntriesPerRecord entries, and a thousand such records
// would otherwise be a million keys at once. checkAheadBytes: the entries
// pass reads records, which may be as large as the cluster lets a
// transaction be; the bytes per read of one prefetch size the next, and
// the first, before any size is known, holds checkAheadFirst reads.
const (
	checkAheadReads = 8192
	checkAheadBytes = 16 << 20
	checkAheadFirst = 64
)

// readAhead serves the point reads of one pass of the checker over
// [lower, upper). On a local store it reads the snapshot. On a Shared
// store a second iterator walks the range ahead of the pass: each time
// the pass has used up the keys it walked, it walks the next checkAhead
// (fewer once they read limit keys), asks reads what each will read, and
// prefetches all of that in one go, so that the pass's reads of them cost
// no round trip. The pass calls step once for every key its own iterator
// visits, so that both walk the same keys in step; a read of a key that
// was not prefetched is still right, only slower.
type readAhead struct {
	snap  store.ReadSnapshot
	reads func(key, val []byte, out [][]byte) [][]byte
	ahead store.Iterator // nil on a local store
	look  store.Iterator // the prefetched reads
	more  bool           // ahead is on a key it has not walked yet
	left  int            // keys of the pass up to the end of the prefetch
	keys  [][]byte
	limit int // reads the next prefetch may hold
	// got and gotBytes count the reads served since the last prefetch and
	// the bytes they returned.
	got, gotBytes int
}

// newReadAhead returns the reader of a pass over [lower, upper); reads
// appends the keys the pass reads for the key and value of one of its
// keys. Close releases it.
func newReadAhead(snap store.ReadSnapshot, shared bool, lower, upper []byte,
	reads func(key, val []byte, out [][]byte) [][]byte) (*readAhead, error) {
	r := &readAhead{snap: snap, reads: reads, limit: checkAheadFirst}
	if !shared {
		return r, nil
	}
	var err error
	if r.ahead, err = snap.NewIterator(lower, upper); err != nil {
		return nil, err
	}
	if r.look, err = snap.NewIterator(nil, nil); err != nil {
		_ = r.ahead.Close()
		return nil, err
	}
	r.more = r.ahead.First()
	return r, nil
}

// step tells r that the pass has moved on to its next key, and prefetches
// when the pass reaches the end of what was prefetched.
func (r *readAhead) step() error {
	if r.ahead == nil {
		return nil
	}
	if r.left > 0 {
		r.left--
		return nil
	}
	if r.got > 0 {
		per := max(r.gotBytes/r.got, 1)
		r.limit = min(max(checkAheadBytes/per, 1), checkAheadReads)
	}
	r.got, r.gotBytes = 0, 0
	r.keys = r.keys[:0]
	for n := 0; n < checkAhead && len(r.keys) < r.limit && r.more; n++ {
		r.keys = r.reads(r.ahead.Key(), r.ahead.Value(), r.keys)
		r.left++
		r.more = r.ahead.Next()
	}
	if err := r.ahead.Error(); err != nil {
		return fmt.Errorf("check: read ahead: %w", err)
	}
	if r.left > 0 {
		r.left-- // the key the pass is on
	}
	if err := r.look.Prefetch(r.keys); err != nil {
		return fmt.Errorf("check: prefetch: %w", err)
	}
	return nil
}

// get is the pass's point read of key.
func (r *readAhead) get(key, dst []byte) ([]byte, bool, error) {
	if r.look == nil {
		return r.snap.Get(key, dst)
	}
	val, found, err := r.look.Lookup(key, dst)
	r.got++
	r.gotBytes += len(val)
	return val, found, err
}

// Close releases the iterators.
func (r *readAhead) Close() {
	if r.ahead != nil {
		_ = r.ahead.Close()
		_ = r.look.Close()
	}
}
