package recordcache

import (
	"fmt"
	"testing"
	"unsafe"
)

func TestFillGet(t *testing.T) {
	c := New(1 << 20)
	c.Fill([]byte("k"), []byte("v1"), c.Gen())
	if v, ok := c.Get([]byte("k"), nil); !ok || string(v) != "v1" {
		t.Fatalf("got %q %v", v, ok)
	}
	if _, ok := c.Get([]byte("other"), nil); ok {
		t.Fatal("hit on a key never filled")
	}
}

// View answers as Get does, with the cache's own bytes: a record viewed
// stays as it was when its key is written again or the cache cleared.
func TestViewMatchesGet(t *testing.T) {
	c := New(1 << 20)
	c.Fill([]byte("k"), []byte("v1"), c.Gen())
	v, ok := c.View([]byte("k"))
	if !ok || string(v) != "v1" {
		t.Fatalf("viewed %q %v", v, ok)
	}
	if _, ok := c.View([]byte("other")); ok {
		t.Fatal("hit on a key never filled")
	}
	c.BeginWrite()
	c.Invalidate([]byte("k"))
	c.EndWrite()
	c.Fill([]byte("k"), []byte("v2"), c.Gen())
	c.BeginWrite()
	c.Clear()
	c.EndWrite()
	if string(v) != "v1" {
		t.Fatalf("a viewed record changed to %q", v)
	}
	if _, ok := c.View([]byte("k")); ok {
		t.Fatal("cleared key still viewed")
	}
	var none *Cache
	if _, ok := none.View([]byte("k")); ok {
		t.Fatal("hit on a nil cache")
	}
}

// A read taken before or during a write is not kept; one after it is.
func TestWriteRefusesOverlappingFills(t *testing.T) {
	c := New(1 << 20)
	before := c.Gen()
	c.BeginWrite()
	during := c.Gen()
	c.Invalidate([]byte("k"))
	c.Fill([]byte("k"), []byte("old"), before)
	c.Fill([]byte("k"), []byte("old"), during)
	c.EndWrite()
	c.Fill([]byte("k"), []byte("old"), before)
	c.Fill([]byte("k"), []byte("either"), during)
	if v, ok := c.Get([]byte("k"), nil); ok {
		t.Fatalf("kept %q from a read that overlapped a write", v)
	}
	c.Fill([]byte("k"), []byte("new"), c.Gen())
	if v, ok := c.Get([]byte("k"), nil); !ok || string(v) != "new" {
		t.Fatalf("got %q %v", v, ok)
	}
	c.BeginWrite()
	c.Invalidate([]byte("k"))
	if _, ok := c.Get([]byte("k"), nil); ok {
		t.Fatal("invalidated key still served")
	}
	c.Fill([]byte("j"), []byte("x"), 0)
	c.Clear()
	c.EndWrite()
	if c.Bytes() != 0 {
		t.Fatalf("%d bytes after Clear", c.Bytes())
	}
}

func TestBudget(t *testing.T) {
	const budget = 64 << 10
	c := New(budget)
	val := make([]byte, 100)
	for i := range 10000 {
		c.Fill(fmt.Appendf(nil, "key%d", i), val, c.Gen())
		if b := c.Bytes(); b > budget {
			t.Fatalf("%d bytes used after %d fills, budget %d", b, i+1, budget)
		}
	}
	if c.Bytes() < budget/2 {
		t.Fatalf("only %d of %d bytes used", c.Bytes(), budget)
	}
	// A record larger than a shard's part is never kept.
	c.Fill([]byte("big"), make([]byte, budget), c.Gen())
	if _, ok := c.Get([]byte("big"), nil); ok {
		t.Fatal("kept a record larger than the budget")
	}
}

func TestDisabled(t *testing.T) {
	c := New(0)
	if c != nil {
		t.Fatal("New(0) made a cache")
	}
	c.BeginWrite()
	c.Invalidate([]byte("k"))
	c.Fill([]byte("k"), []byte("v"), c.Gen())
	c.EndWrite()
	if _, ok := c.Get([]byte("k"), nil); ok || c.Bytes() != 0 {
		t.Fatal("a disabled cache holds records")
	}
}

func TestDefaultBytes(t *testing.T) {
	for _, tc := range []struct {
		memory uint64
		want   int64
	}{
		{0, 256 << 20},        // unknown
		{256 << 20, 64 << 20}, // small container: the floor
		{10 << 30, 2 << 30},   // 1/5
		{24 << 30, 24 << 30 / 5},
		{1 << 40, 8 << 30}, // large machine: the ceiling
	} {
		if got := DefaultBytes(tc.memory); got != tc.want {
			t.Errorf("DefaultBytes(%d) = %d, want %d", tc.memory, got, tc.want)
		}
	}
}

// GetMany answers every key as Get does: hits with their records, misses
// (never filled, invalidated, or absent from a nil cache) as misses, for
// keys spread over every shard and repeated within a batch.
func TestGetManyMatchesGet(t *testing.T) {
	c := New(1 << 20)
	var keys [][]byte
	for i := range 500 {
		k := fmt.Appendf(nil, "key%d", i%400) // 100 keys twice
		keys = append(keys, k)
		if i%3 != 0 {
			c.Fill(k, fmt.Appendf(nil, "val%d", i%400), c.Gen())
		}
	}
	c.BeginWrite()
	c.Invalidate([]byte("key7"))
	c.EndWrite()
	var b Batch
	for _, cache := range []*Cache{c, nil} {
		for round := range 2 { // the second reuses b's buffers
			cache.GetMany(len(keys), func(i int) []byte { return keys[i] }, &b)
			if b.Len() != len(keys) {
				t.Fatalf("round %d: %d answers for %d keys", round, b.Len(), len(keys))
			}
			hits := 0
			for i, k := range keys {
				want, wantOK := cache.Get(k, nil)
				got, ok := b.Val(i)
				if ok != wantOK || string(got) != string(want) {
					t.Fatalf("key %s: GetMany %q %v, Get %q %v", k, got, ok, want, wantOK)
				}
				if ok {
					hits++
				}
			}
			if cache != nil && (hits < 300 || hits == len(keys)) {
				t.Fatalf("%d hits of %d keys: the test lost its misses or hits", hits, len(keys))
			}
		}
	}
	if _, ok := b.Val(0); ok {
		t.Fatal("a nil cache hit")
	}
}

// Random fills, invalidations and clears against a model map: with room
// for every key nothing is evicted, so every key filled and not since
// invalidated hits with its last record (which checks that removals keep
// the other entries of a probe run reachable), and no other key hits;
// with a small budget a hit still returns the key's last record.
func TestTableModel(t *testing.T) {
	for _, budget := range []int64{1 << 22, 16 << 10} {
		c := New(budget)
		model := map[string]string{}
		rnd := uint64(12345)
		next := func(n int) int {
			rnd ^= rnd << 13
			rnd ^= rnd >> 7
			rnd ^= rnd << 17
			return int(rnd % uint64(n)) //nolint:gosec // small n
		}
		var b Batch
		keys := make([][]byte, 3000)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "k%d", i)
		}
		for step := range 40000 {
			k := keys[next(len(keys))]
			switch op := next(100); {
			case op < 60:
				v := fmt.Sprintf("v%d", step)
				if step%97 == 0 {
					v = "" // an empty record is a hit too
				}
				c.Fill(k, []byte(v), c.Gen())
				model[string(k)] = v
			case op < 95:
				c.BeginWrite()
				c.Invalidate(k)
				c.EndWrite()
				delete(model, string(k))
			case op == 95 && step%50 == 0:
				c.BeginWrite()
				c.Clear()
				c.EndWrite()
				clear(model)
			}
			if step%1000 != 999 {
				continue
			}
			c.GetMany(len(keys), func(i int) []byte { return keys[i] }, &b)
			hits := 0
			for i, k := range keys {
				got, ok := c.Get(k, nil)
				want, in := model[string(k)]
				if ok && (!in || string(got) != want) || !ok && in && budget == 1<<22 {
					t.Fatalf("budget %d step %d key %s: got %q %v, model %q %v", budget, step, k, got, ok, want, in)
				}
				if bv, bok := b.Val(i); bok != ok || string(bv) != string(got) {
					t.Fatalf("key %s: GetMany %q %v, Get %q %v", k, bv, bok, got, ok)
				}
				if ok {
					hits++
				}
			}
			if hits == 0 && len(model) > 0 {
				t.Fatalf("budget %d: no hits of %d keys", budget, len(model))
			}
			if c.Bytes() > budget {
				t.Fatalf("%d bytes used, budget %d", c.Bytes(), budget)
			}
		}
	}
}

// entryCost counts what the allocator gives an entry (append rounds a
// slice's capacity up to the size class it allocates), so that the
// budget holds what it says.
func TestEntryCostCoversAllocation(t *testing.T) {
	for n := 1; n <= 64<<10; n++ {
		alloc := int64(cap(append([]byte(nil), make([]byte, n)...)))
		if got := entryCost(n); got != alloc {
			t.Fatalf("entryCost(%d) = %d, allocation %d", n, got, alloc)
		}
	}
}

// The budget counts what the shards hold: their entries' allocations and
// their tables.
func TestBytesCountsEntriesAndTables(t *testing.T) {
	c := New(1 << 20)
	val := make([]byte, 100)
	for i := range 3000 {
		c.Fill(fmt.Appendf(nil, "key%d", i), val, c.Gen())
	}
	var want int64
	for i := range c.shards {
		s := &c.shards[i]
		want += int64(len(s.slots)) * slotBytes
		for j := range s.slots {
			if sl := &s.slots[j]; sl.p != nil {
				want += entryCost(int(sl.n))
			}
		}
	}
	if got := c.Bytes(); got != want || got > 1<<20 {
		t.Fatalf("Bytes() = %d, entries and tables hold %d, budget %d", got, want, 1<<20)
	}
}

// A shard takes a whole number of cache lines, so that one shard's lock
// and table header do not share a line with its neighbour's.
func TestShardFillsCacheLines(t *testing.T) {
	if size := unsafe.Sizeof(shard{}); size%64 != 0 {
		t.Errorf("a shard is %d bytes", size)
	}
}
