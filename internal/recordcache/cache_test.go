package recordcache

import (
	"fmt"
	"testing"
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
		{0, 256 << 20},       // unknown
		{1 << 30, 64 << 20},  // small container: the floor
		{8 << 30, 256 << 20}, // 1/32
		{24 << 30, 768 << 20},
		{1 << 40, 1 << 30}, // large machine: the ceiling
	} {
		if got := DefaultBytes(tc.memory); got != tc.want {
			t.Errorf("DefaultBytes(%d) = %d, want %d", tc.memory, got, tc.want)
		}
	}
}
