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
// holds an equal part and, when full, evicts entries at random (the first
// entry at or after a random slot of its table), which costs nothing to
// track and keeps the hot keys with high probability under a skewed load.
package recordcache

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
)

// shards spreads readers over this many locks.
const shards = 64

// EntryOverhead is what an entry costs beyond its key and value bytes (its
// share of the shard's table, whose slots stay between a quarter and half
// full, the entry's length prefix and allocation rounding), counted
// against the budget.
const EntryOverhead = 96

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

// shard is one lock's part of the cache; mu guards every other field.
//
// The table is open-addressed with linear probing, keyed by the record
// key's 64-bit hash (computed once per call; its low bits pick the shard,
// the rest the slot): a probe reads one slot, usually in the cache line
// it starts in, and then the entry's bytes, where Go's map read a control
// word, then a slot in another line, then the entry. A slot holds the
// hash and the entry, so a probe compares hashes without touching the
// entry; the entry holds its key, so a collision is a miss and a fill
// replaces the colliding entry. At most half of the slots are used, so
// every probe ends at an empty slot.
type shard struct {
	mu    sync.Mutex
	slots []slot // len a power of two, or 0
	used  int    // occupied slots
	bytes int64  // sum of entry costs
	rnd   uint64 // eviction cursor (xorshift state)
	_     [16]byte
}

// slot is one place of a shard's table; kv nil means empty.
type slot struct {
	h uint64
	// kv is the entry: uvarint key length, key, record. Never mutated
	// once stored, so a reader may keep it after unlocking.
	kv []byte
}

// entryKV returns the key and record of entry kv.
func entryKV(kv []byte) (key, val []byte) {
	n, l := binary.Uvarint(kv)
	kv = kv[l:]
	return kv[:n:n], kv[n:len(kv):len(kv)]
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

func entryCost(kv []byte) int64 { return int64(len(kv)) + EntryOverhead }

// New returns a cache holding at most maxBytes (keys, values and
// EntryOverhead per entry), or nil (no cache) when maxBytes is not
// positive.
func New(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	c := &Cache{seed: maphash.MakeSeed(), perShard: max(maxBytes/shards, 1)}
	for i := range c.shards {
		c.shards[i].rnd = uint64(i)*0x9E3779B97F4A7C15 | 1
	}
	return c
}

func (c *Cache) shard(key []byte) (*shard, uint64) {
	h := maphash.Bytes(c.seed, key)
	return &c.shards[h%shards], h
}

// home is the slot where a probe for h starts.
func (s *shard) home(h uint64) int { return int(h>>6) & (len(s.slots) - 1) } //nolint:gosec // masked

// find returns the slot holding hash h, or -1.
func (s *shard) find(h uint64) int {
	if len(s.slots) == 0 {
		return -1
	}
	mask := len(s.slots) - 1
	for i := s.home(h); ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if sl.kv == nil {
			return -1
		}
		if sl.h == h {
			return i
		}
	}
}

// remove empties slot i, moving later slots of its probe run back so that
// every entry stays reachable from its home slot (no tombstones).
func (s *shard) remove(i int) {
	mask := len(s.slots) - 1
	s.bytes -= entryCost(s.slots[i].kv)
	s.used--
	for j := (i + 1) & mask; s.slots[j].kv != nil; j = (j + 1) & mask {
		home := s.home(s.slots[j].h)
		// Entry j may move to i unless its home lies cyclically in (i, j].
		stays := home > i && home <= j
		if i > j {
			stays = home > i || home <= j
		}
		if !stays {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = slot{}
}

// insert stores kv under h, which the table does not hold, growing the
// table to stay at most half full.
func (s *shard) insert(h uint64, kv []byte) {
	if 2*(s.used+1) > len(s.slots) {
		old := s.slots
		s.slots = make([]slot, max(8, 2*len(old)))
		for _, sl := range old {
			if sl.kv != nil {
				s.place(sl)
			}
		}
	}
	s.place(slot{h, kv})
	s.used++
	s.bytes += entryCost(kv)
}

// place puts sl in the first empty slot of its probe run.
func (s *shard) place(sl slot) {
	mask := len(s.slots) - 1
	i := s.home(sl.h)
	for s.slots[i].kv != nil {
		i = (i + 1) & mask
	}
	s.slots[i] = sl
}

// evictOne removes an entry at random: the first at or after a random
// slot.
func (s *shard) evictOne() {
	s.rnd ^= s.rnd << 13
	s.rnd ^= s.rnd >> 7
	s.rnd ^= s.rnd << 17
	mask := len(s.slots) - 1
	i := int(s.rnd) & mask //nolint:gosec // masked
	for s.slots[i].kv == nil {
		i = (i + 1) & mask
	}
	s.remove(i)
}

// Get appends the cached record of key to dst[:0] and reports a hit.
func (c *Cache) Get(key, dst []byte) ([]byte, bool) {
	if c == nil {
		return dst[:0], false
	}
	s, h := c.shard(key)
	s.mu.Lock()
	var kv []byte
	if i := s.find(h); i >= 0 {
		kv = s.slots[i].kv
	}
	s.mu.Unlock()
	if kv == nil {
		return dst[:0], false
	}
	k, val := entryKV(kv)
	if !bytes.Equal(k, key) {
		return dst[:0], false
	}
	return append(dst[:0], val...), true
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
	cost := int64(uvarintLen(len(key))+len(key)+len(val)) + EntryOverhead
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
	if i := s.find(h); i >= 0 {
		s.remove(i)
	}
	for s.bytes+cost > c.perShard {
		s.evictOne()
	}
	// One allocation holds the entry.
	kv := make([]byte, 0, int(cost-EntryOverhead))
	kv = binary.AppendUvarint(kv, uint64(len(key)))
	kv = append(append(kv, key...), val...)
	s.insert(h, kv)
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
	// A colliding entry of another key goes too: harmless.
	if i := s.find(h); i >= 0 {
		s.remove(i)
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
		s.slots, s.used, s.bytes = nil, 0, 0
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
// goroutine. Its records are the cache's own entries, which are never
// written once stored: they stay valid (and must not be written) after
// the next call, however the cache changes.
type Batch struct {
	last  byte // keeps GetMany's reads of the entries' last bytes
	hs    []uint64
	order []int32  // key positions grouped by shard
	kvs   [][]byte // per key: its entry, then its record; nil for a miss
}

// Len returns how many keys the last GetMany looked up.
func (b *Batch) Len() int { return len(b.kvs) }

// Val returns key i's record and whether it was a hit.
func (b *Batch) Val(i int) ([]byte, bool) {
	v := b.kvs[i]
	return v, v != nil
}

// GetMany looks up the n keys key(0)..key(n-1) into b: the lookups of a
// batch, as Get would answer each at the moment of the call. It takes each
// shard's lock once for all of its keys instead of once per key, and it
// probes in two tight passes, the slots (under the locks), then the
// entries they point to (after): a probe is mostly waiting for memory, and
// with little work between them the misses of consecutive probes overlap
// instead of being waited for one after another.
func (c *Cache) GetMany(n int, key func(i int) []byte, b *Batch) {
	b.kvs = slices.Grow(b.kvs[:0], n)[:n]
	if c == nil {
		clear(b.kvs)
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
			b.kvs[i] = nil
			if j := s.find(b.hs[i]); j >= 0 {
				b.kvs[i] = s.slots[j].kv
			}
		}
		s.mu.Unlock()
		lo = hi
	}
	var last byte
	for i, kv := range b.kvs {
		if kv == nil {
			continue
		}
		// Reading the entry's last byte with its first asks for all of
		// its cache lines at once (a record is mostly a line or two), so
		// that the caller's copy of it does not wait for them one by one.
		last ^= kv[len(kv)-1]
		k, val := entryKV(kv)
		if !bytes.Equal(k, key(i)) {
			val = nil
		}
		b.kvs[i] = val
	}
	b.last = last
}
