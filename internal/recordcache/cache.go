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
// The budget counts what the cache really holds: each entry's allocation
// (rounded up as the allocator rounds it) and each shard's table.
package recordcache

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// shards spreads readers over this many locks.
const shards = 64

// slotBytes is the size of a slot, counted against the budget per slot of
// each table.
const slotBytes = int64(unsafe.Sizeof(slot{}))

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
// its high 32, the tag, the slot): a probe reads one slot, usually in the
// cache line it starts in, and then the entry's bytes, where Go's map read
// a control word, then a slot in another line, then the entry. A slot
// holds the tag and the entry, so a probe compares tags without touching
// the entry; the entry holds its key, so a collision is a miss and a fill
// replaces the colliding entry. At most half of the slots are used, so
// every probe ends at an empty slot. bytes counts the entries' allocations
// and the table's slots.
type shard struct {
	mu    sync.Mutex
	slots []slot  // len a power of two, or 0
	used  int     // occupied slots
	bytes int64   // sum of entry costs
	rnd   uint64  // eviction cursor (xorshift state)
	_     [8]byte // a shard is one cache line: neighbouring shards' locks stay apart
}

// slot is one place of a shard's table; p nil means empty. Sixteen bytes
// where a hash and a slice took 32: the table is most of what the cache
// spends beyond the records themselves.
type slot struct {
	// p and n are the entry, n bytes at p: uvarint key length, key,
	// record. p points at the start of a []byte allocation, which it keeps
	// alive; the entry is never mutated once stored, so a reader may keep
	// it after unlocking.
	p   unsafe.Pointer
	n   uint32
	tag uint32 // the key hash's high 32 bits
}

// kv returns the slot's entry.
func (sl *slot) kv() []byte { return unsafe.Slice((*byte)(sl.p), sl.n) }

func tagOf(h uint64) uint32 { return uint32(h >> 32) }

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

// entryCost is what an entry of n bytes holds: its allocation, which the
// allocator rounds up to its size class (sizeClasses), or to whole pages
// above them.
func entryCost(n int) int64 {
	if i, _ := slices.BinarySearch(sizeClasses, n); i < len(sizeClasses) {
		return int64(sizeClasses[i])
	}
	return int64(n+8191) &^ 8191
}

// sizeClasses are the allocator's sizes for small byte slices, in order,
// learnt once from the capacities append gives (it allocates a slice's
// size class and keeps all of it): one probe per class.
var sizeClasses = func() []int {
	var classes []int
	for n := 1; n <= 32<<10; {
		c := cap(append([]byte(nil), make([]byte, n)...))
		classes = append(classes, c)
		n = c + 1
	}
	return classes
}()

// New returns a cache holding at most maxBytes (keys, values and
// their tables; see entryCost), or nil (no cache) when maxBytes is not
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

// home is the slot where a probe for tag starts.
func (s *shard) home(tag uint32) int { return int(tag) & (len(s.slots) - 1) }

// tableCost is what the shard's table holds.
func (s *shard) tableCost() int64 { return int64(len(s.slots)) * slotBytes }

// find returns the slot holding tag, or -1.
func (s *shard) find(tag uint32) int {
	if len(s.slots) == 0 {
		return -1
	}
	mask := len(s.slots) - 1
	for i := s.home(tag); ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if sl.p == nil {
			return -1
		}
		if sl.tag == tag {
			return i
		}
	}
}

// remove empties slot i, moving later slots of its probe run back so that
// every entry stays reachable from its home slot (no tombstones).
func (s *shard) remove(i int) {
	mask := len(s.slots) - 1
	s.bytes -= entryCost(int(s.slots[i].n))
	s.used--
	for j := (i + 1) & mask; s.slots[j].p != nil; j = (j + 1) & mask {
		home := s.home(s.slots[j].tag)
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

// makeRoom evicts entries until an entry of cost more fits in limit
// bytes, with the table grown if it must be to stay at most half full
// (or, when a larger table would not fit, with one entry fewer). It
// reports false when the entry cannot fit even in an empty shard.
func (s *shard) makeRoom(cost, limit int64) bool {
	for s.used > 0 && s.bytes+s.tableCost()+cost > limit {
		s.evictOne()
	}
	if 2*(s.used+1) <= len(s.slots) {
		return s.bytes+s.tableCost()+cost <= limit
	}
	n := max(8, 2*len(s.slots))
	for s.used > 0 && s.bytes+int64(n)*slotBytes+cost > limit {
		if 2*(s.used+1) <= len(s.slots) {
			return true // the table has room once more without growing
		}
		s.evictOne()
	}
	if s.bytes+int64(n)*slotBytes+cost > limit {
		return false
	}
	old := s.slots
	s.slots = make([]slot, n)
	for _, sl := range old {
		if sl.p != nil {
			s.place(sl)
		}
	}
	return true
}

// insert stores entry kv under tag, which the table does not hold; the
// table has room (makeRoom).
func (s *shard) insert(tag uint32, kv []byte) {
	s.place(slot{p: unsafe.Pointer(unsafe.SliceData(kv)), n: uint32(len(kv)), tag: tag}) //nolint:gosec // Fill keeps entries under 4 GiB
	s.used++
	s.bytes += entryCost(len(kv))
}

// place puts sl in the first empty slot of its probe run.
func (s *shard) place(sl slot) {
	mask := len(s.slots) - 1
	i := s.home(sl.tag)
	for s.slots[i].p != nil {
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
	for s.slots[i].p == nil {
		i = (i + 1) & mask
	}
	s.remove(i)
}

// Get appends the cached record of key to dst[:0] and reports a hit.
func (c *Cache) Get(key, dst []byte) ([]byte, bool) {
	val, ok := c.View(key)
	if !ok {
		return dst[:0], false
	}
	return append(dst[:0], val...), true
}

// View returns the cached record of key, not a copy: the cache's own
// entry, as GetMany's Batch does. Entries are never written once stored,
// so it stays valid (and must not be written) however the cache changes;
// a caller that copies the record elsewhere anyway saves Get's copy.
func (c *Cache) View(key []byte) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	s, h := c.shard(key)
	s.mu.Lock()
	var kv []byte
	if i := s.find(tagOf(h)); i >= 0 {
		kv = s.slots[i].kv()
	}
	s.mu.Unlock()
	if kv == nil {
		return nil, false
	}
	k, val := entryKV(kv)
	if !bytes.Equal(k, key) {
		return nil, false
	}
	return val, true
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
	n := uvarintLen(len(key)) + len(key) + len(val)
	cost := entryCost(n)
	if cost+8*slotBytes > c.perShard || n > math.MaxUint32 {
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
	tag := tagOf(h)
	if i := s.find(tag); i >= 0 {
		s.remove(i)
	}
	if !s.makeRoom(cost, c.perShard) {
		return
	}
	// One allocation holds the entry.
	kv := make([]byte, 0, n)
	kv = binary.AppendUvarint(kv, uint64(len(key)))
	kv = append(append(kv, key...), val...)
	s.insert(tag, kv)
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
	if i := s.find(tagOf(h)); i >= 0 {
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
		n += s.bytes + s.tableCost()
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
// probes in two steps, the slots (under the locks), then the entries they
// point to (after), each preceded by a pass that only reads the memory
// the step needs: a probe is mostly waiting for memory, and a loop of
// loads that depend on nothing loaded before has their misses overlap
// instead of waited for one after another (the probes' branches on the
// loaded tags and lengths stopped that).
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
	// count[k] now ends shard k's keys in order.
	var touched uint32
	lo := int32(0)
	for k := range shards {
		hi := count[k]
		if hi == lo {
			continue
		}
		s := &c.shards[k]
		group := b.order[lo:hi]
		lo = hi
		s.mu.Lock()
		if len(s.slots) == 0 {
			s.mu.Unlock()
			for _, i := range group {
				b.kvs[i] = nil
			}
			continue
		}
		// Ask for every key's home slot first, in a loop with nothing to
		// wait on, so that their memory misses overlap; the probes then
		// mostly find their lines in the CPU's cache.
		for _, i := range group {
			touched ^= s.slots[s.home(tagOf(b.hs[i]))].tag
		}
		for _, i := range group {
			b.kvs[i] = nil
			if j := s.find(tagOf(b.hs[i])); j >= 0 {
				b.kvs[i] = s.slots[j].kv()
			}
		}
		s.mu.Unlock()
	}
	// Every entry's first and last bytes are asked for first, in a loop
	// with nothing to wait on, so that the entries' memory misses overlap
	// (a record is mostly a line or two): the key checks below and the
	// caller's copies then find them in the CPU's cache.
	var last byte
	for _, kv := range b.kvs {
		if len(kv) > 0 {
			last ^= kv[0] ^ kv[len(kv)-1]
		}
	}
	for i, kv := range b.kvs {
		if kv == nil {
			continue
		}
		k, val := entryKV(kv)
		if !bytes.Equal(k, key(i)) {
			val = nil
		}
		b.kvs[i] = val
	}
	b.last = last ^ byte(touched)
}
