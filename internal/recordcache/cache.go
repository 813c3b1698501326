// Package recordcache owns the hot-record cache: a bounded map from record
// key to stored record bytes that serves primary-key point reads without a
// storage seek.
//
// The cache never serves a record older than the store's latest committed
// state. Writers (which the caller serializes: the engine holds writeMu)
// bracket every commit with BeginWrite and EndWrite and, between them,
// Invalidate each record key they write (or Clear all). A reader that
// misses takes Gen before its storage read and offers the record with
// Fill; the cache keeps it only if no write began since that Gen. So an
// entry is either from a read that no write overlapped, or absent:
//
//   - a write's keys are removed before its batch becomes visible and
//     cannot come back until it has ended;
//   - a read that overlapped a write (its Gen is odd, or has moved on) is
//     not kept, whichever state it saw.
//
// A hit therefore returns what a storage read at that moment would.
// Memory stays within the byte budget given to New: each of the shards
// holds an equal part and, when full, evicts entries at random (Go's map
// iteration order), which costs nothing to track and keeps the hot keys
// with high probability under a skewed load.
package recordcache

import (
	"bytes"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// shards spreads readers over this many locks.
const shards = 64

// EntryOverhead is what an entry costs beyond its key and value bytes (map
// slot, string and slice headers, allocation rounding), counted against the
// budget.
const EntryOverhead = 64

// Cache is a bounded record cache, safe for concurrent use by readers and
// one writer at a time. A nil *Cache is a valid cache that holds nothing.
type Cache struct {
	// gen counts write boundaries: odd while a write is in flight. Fill
	// keeps a record only when gen still equals the Gen its reader took.
	gen      atomic.Uint64
	seed     maphash.Seed
	perShard int64
	shards   [shards]shard
}

// shard is one lock's part of the cache; mu guards m and bytes.
//
// m is keyed by the record key's 64-bit hash, computed once per call
// (it also picks the shard), rather than by the key itself, which the map
// would hash again; the entry keeps the key, so a collision is a miss
// and a fill replaces the colliding entry.
type shard struct {
	mu    sync.Mutex
	m     map[uint64]entry
	bytes int64    // sum of entry costs in m
	_     [40]byte // keep neighbouring shards' locks off one cache line
}

// entry is a cached record; neither slice is mutated once stored.
type entry struct {
	key, val []byte
}

func (en entry) cost() int64 { return int64(len(en.key)+len(en.val)) + EntryOverhead }

// New returns a cache holding at most maxBytes (keys, values and
// EntryOverhead per entry), or nil (no cache) when maxBytes is not
// positive.
func New(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	c := &Cache{seed: maphash.MakeSeed(), perShard: max(maxBytes/shards, 1)}
	for i := range c.shards {
		c.shards[i].m = make(map[uint64]entry)
	}
	return c
}

func (c *Cache) shard(key []byte) (*shard, uint64) {
	h := maphash.Bytes(c.seed, key)
	return &c.shards[h%shards], h
}

// Get appends the cached record of key to dst[:0] and reports a hit.
func (c *Cache) Get(key, dst []byte) ([]byte, bool) {
	if c == nil {
		return dst[:0], false
	}
	s, h := c.shard(key)
	s.mu.Lock()
	en, ok := s.m[h]
	ok = ok && bytes.Equal(en.key, key)
	if ok {
		dst = append(dst[:0], en.val...)
	}
	s.mu.Unlock()
	if !ok {
		return dst[:0], false
	}
	return dst, true
}

// Gen returns the write generation; a reader takes it before the storage
// read whose result it will offer to Fill.
func (c *Cache) Gen() uint64 {
	if c == nil {
		return 1
	}
	return c.gen.Load()
}

// Fill offers val, read from storage after gen was taken, as the record of
// key. It is kept only if no write began since (see the package comment);
// val is copied.
func (c *Cache) Fill(key, val []byte, gen uint64) {
	if c == nil || gen&1 == 1 {
		return
	}
	cost := int64(len(key)+len(val)) + EntryOverhead
	if cost > c.perShard {
		return
	}
	s, h := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Under the shard lock: a writer that moves gen on after this check
	// invalidates key under the same lock, so after this insert.
	if c.gen.Load() != gen {
		return
	}
	if old, ok := s.m[h]; ok {
		delete(s.m, h)
		s.bytes -= old.cost()
	}
	if s.bytes+cost > c.perShard { // starting a map iteration is not free
		for k, en := range s.m {
			if s.bytes+cost <= c.perShard {
				break
			}
			delete(s.m, k)
			s.bytes -= en.cost()
		}
	}
	// One allocation holds both.
	kv := make([]byte, len(key)+len(val))
	copy(kv, key)
	copy(kv[len(key):], val)
	s.m[h] = entry{key: kv[:len(key):len(key)], val: kv[len(key):]}
	s.bytes += cost
}

// BeginWrite starts a write: from now until EndWrite no read is kept. The
// caller serializes writes and calls Invalidate for every record key the
// write sets or deletes before the write becomes visible.
func (c *Cache) BeginWrite() {
	if c != nil {
		c.gen.Add(1)
	}
}

// EndWrite ends the write begun by BeginWrite, once it is visible (or has
// failed).
func (c *Cache) EndWrite() {
	if c != nil {
		c.gen.Add(1)
	}
}

// Invalidate removes key's record; only between BeginWrite and EndWrite.
func (c *Cache) Invalidate(key []byte) {
	if c == nil {
		return
	}
	s, h := c.shard(key)
	s.mu.Lock()
	if len(s.m) > 0 {
		// A colliding entry of another key goes too: harmless.
		if en, ok := s.m[h]; ok {
			delete(s.m, h)
			s.bytes -= en.cost()
		}
	}
	s.mu.Unlock()
}

// Clear removes every record (for a write that deletes ranges: a dropped
// type); only between BeginWrite and EndWrite.
func (c *Cache) Clear() {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.bytes = 0
		s.mu.Unlock()
	}
}

// Bytes returns the budget counted as used.
func (c *Cache) Bytes() int64 {
	if c == nil {
		return 0
	}
	var n int64
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.bytes
		s.mu.Unlock()
	}
	return n
}

// Batch is GetMany's scratch and result, reused from call to call by one
// goroutine: the records hit are copied into it, valid until the next call.
type Batch struct {
	hs    []uint64
	order []int32 // key positions grouped by shard
	spans []span  // per key: its record in vals, or a miss
	vals  []byte
}

// span is a hit's record, vals[start:end]; start < 0 is a miss.
type span struct{ start, end int32 }

// Len returns how many keys the last GetMany looked up.
func (b *Batch) Len() int { return len(b.spans) }

// Val returns key i's record and whether it was a hit.
func (b *Batch) Val(i int) ([]byte, bool) {
	sp := b.spans[i]
	if sp.start < 0 {
		return nil, false
	}
	return b.vals[sp.start:sp.end:sp.end], true
}

// GetMany looks up the n keys key(0)..key(n-1) into b: the lookups of a
// batch, as Get would answer each at the moment of the call. It takes each
// shard's lock once for all of its keys instead of once per key, and with
// no lock between them the probes of one shard's keys overlap their
// memory misses, which serialize when lookups alternate with the work done
// on each record (a probe is mostly waiting for memory: the map's control
// word, then the entry). Records larger than math.MaxInt32 bytes in all
// are left as misses.
func (c *Cache) GetMany(n int, key func(i int) []byte, b *Batch) {
	b.spans = slices.Grow(b.spans[:0], n)[:n]
	b.vals = b.vals[:0]
	if c == nil {
		for i := range b.spans {
			b.spans[i] = span{-1, -1}
		}
		return
	}
	b.hs = slices.Grow(b.hs[:0], n)[:n]
	b.order = slices.Grow(b.order[:0], n)[:n]
	var count [shards + 1]int32
	for i := range n {
		h := maphash.Bytes(c.seed, key(i))
		b.hs[i] = h
		count[h%shards+1]++
	}
	for s := 1; s <= shards; s++ {
		count[s] += count[s-1]
	}
	for i, h := range b.hs {
		b.order[count[h%shards]] = int32(i) //nolint:gosec // n is a batch of lookups, far below 2^31
		count[h%shards]++
	}
	for lo := 0; lo < n; {
		s := &c.shards[b.hs[b.order[lo]]%shards]
		hi := lo
		s.mu.Lock()
		for ; hi < n && &c.shards[b.hs[b.order[hi]]%shards] == s; hi++ {
			i := b.order[hi]
			en, ok := s.m[b.hs[i]]
			if !ok || !bytes.Equal(en.key, key(int(i))) || len(b.vals)+len(en.val) > math.MaxInt32 {
				b.spans[i] = span{-1, -1}
				continue
			}
			start := len(b.vals)
			b.vals = append(b.vals, en.val...)
			b.spans[i] = span{int32(start), int32(len(b.vals))} //nolint:gosec // checked above
		}
		s.mu.Unlock()
		lo = hi
	}
}
