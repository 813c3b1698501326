package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/recordcache"
)

// A Search request's plain primary-key lookups (query.Point) are taken
// out of the planner's way: their keys are encoded once into one arena,
// ordered for the store when it helps (lookupOrder), and probed in the
// record cache together (stageLookups), whether they arrive as messages
// or as wire bytes (searchwire.go).

// allPoints reports whether every query of qs is a plain primary-key
// lookup (query.Point). When it is, buf holds their keys in lookup order
// (lookupOrder), and runChunk takes them from there instead of encoding
// them again.
func (e *Engine) allPoints(qs []*pb.Query, buf *lookupBuf) bool {
	points, rest := e.lookupOrder(qs, buf)
	buf.ready = len(rest) == 0 && len(points) == len(qs)
	return buf.ready
}

// stageLookups looks the chunk's point lookups up in the record cache
// together (recordcache.GetMany), before any runs: probing them one at a
// time between the reads and packing of the others left each probe's
// memory misses to be waited for alone. The cursor takes each lookup's
// answer from the batch (cursor.point). nil when there is no cache or a
// single lookup.
func (e *Engine) stageLookups(points []pointJob, buf *lookupBuf) *recordcache.Batch {
	if len(points) < 2 || e.cache == nil {
		return nil
	}
	var b *recordcache.Batch
	if buf != nil {
		b = &buf.staged
	} else {
		b = new(recordcache.Batch)
	}
	e.cache.GetMany(len(points), func(i int) []byte { return points[i].key }, b)
	return b
}

// pointJob is a plain primary-key lookup of a chunk: query i of the chunk
// reads record key key of type t.
type pointJob struct {
	i   int
	t   *recType
	key []byte
	// count and keysOnly are the query's (wireLookups reads them here).
	count, keysOnly bool
	// hi and lo are the first 16 bytes after the type's key prefix as
	// big-endian numbers (zero padded), set when the points are sorted
	// (keyPoints): comparing them orders almost
	// every pair of keys of one type without a call to bytes.Compare,
	// which made the sort a tenth of a lookup.
	hi, lo uint64
}

// keyHead returns the big-endian numbers of key's bytes 0..7 and 8..15,
// zero padded.
func keyHead(key []byte) (hi, lo uint64) {
	var b [16]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// comparePoints orders jobs by key.
func comparePoints(a, b pointJob) int {
	switch {
	case a.t != b.t:
		return bytes.Compare(a.key, b.key)
	case a.hi != b.hi:
		return cmp.Compare(a.hi, b.hi)
	case a.lo != b.lo:
		return cmp.Compare(a.lo, b.lo)
	}
	return bytes.Compare(a.key, b.key)
}

// lookupBuf holds lookupOrder's buffers for reuse from request to request.
// reuse says that the requests' responses may be built in a respArena;
// ready, that points holds the lookups of the request about to run
// (allPoints).
type lookupBuf struct {
	arena  []byte
	ends   []int
	points []pointJob
	reuse  bool
	ready  bool
	staged recordcache.Batch // the record cache's answers (stageLookups)
	shapes wireShapes        // wirePoints', kept from request to request
}

// keyPoints gives each lookup its key, ends[k] marking where point k's
// key ends in arena, and sorts them as lookupOrder says.
func (e *Engine) keyPoints(points []pointJob, arena []byte, ends []int) {
	start := 0
	for k, end := range ends {
		points[k].key = arena[start:end:end]
		start = end
	}
	if e.st.Shared() {
		return // a store across a network reads each key alike, in any order
	}
	if e.cache == nil || e.sortPoints.Load() {
		for k := range points {
			p := &points[k]
			p.hi, p.lo = keyHead(p.key[len(p.t.prefix):])
		}
		slices.SortFunc(points, comparePoints)
	}
}

// noteMisses sets Engine.sortPoints from a chunk of n point lookups of
// which misses missed the record cache. It writes the flag only when it
// changes: every one-lookup request of every stream ends here, and a
// write of a word the other cores read takes its cache line from them.
func (e *Engine) noteMisses(misses uint64, n int) {
	if n == 0 || e.cache == nil {
		return
	}
	if sort := misses*8 > uint64(n); e.sortPoints.Load() != sort {
		e.sortPoints.Store(sort)
	}
}

// lookupOrder splits a chunk's queries into plain primary-key lookups,
// with their keys encoded once (query.Point) and, on a local store,
// sorted, and the rest, in arrival order, which need the planner.
// Sorted, the lookups move one
// iterator forward through the store, so Pebble continues from where the
// previous seek ended instead of descending from the top
// (TrySeekUsingNext) and often finds the next key in a block it already
// holds. When the record cache served nearly all of the last chunk's
// lookups (Engine.sortPoints), the sort, which then buys nothing, is
// skipped. Results are keyed by query id, so the order in which queries
// finish is the server's to choose.
func (e *Engine) lookupOrder(qs []*pb.Query, buf *lookupBuf) (points []pointJob, rest []int) {
	if e.closed.Load() {
		rest = make([]int, len(qs)) // compile reports the closed engine
		for i := range rest {
			rest[i] = i
		}
		return nil, rest
	}
	cat := e.cat.Load()
	if buf == nil {
		buf = new(lookupBuf)
	}
	arena := buf.arena[:0] // every key; sliced once complete, as appends move it
	ends := slices.Grow(buf.ends[:0], len(qs))
	points = slices.Grow(buf.points[:0], len(qs))
	defer func() { buf.arena, buf.ends, buf.points = arena, ends, points }()
	// A batch's queries mostly name one type (the decoder gives them one
	// string): look it up once per run of equal names.
	var lastName string
	var last *recType
	for i, q := range qs {
		t := last
		if name := q.GetType(); name != lastName || last == nil {
			t, lastName = cat.lookup(name), name
			last = t
		}
		// A lookup that asks for versions takes the planner's path, whose
		// cursor reads them (the record cache holds records only).
		if t != nil && t.point != nil && !q.GetVersions() {
			probe := q
			if q.GetFilter() != "" {
				probe = pointProbe(q) // "id == 42" as text is a lookup too
			}
			var ok bool
			if probe != nil {
				arena, ok = t.point.Key(arena, probe)
			}
			if ok {
				points = append(points, pointJob{i: i, t: t, count: q.GetCount(), keysOnly: q.GetKeysOnly()})
				ends = append(ends, len(arena))
				continue
			}
		}
		rest = append(rest, i)
	}
	e.keyPoints(points, arena, ends)
	return points, rest
}
