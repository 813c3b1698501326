package grpcbuf

import "testing"

func TestDirtyPool(t *testing.T) {
	p := newDirtyPool()
	for _, size := range []int{0, 1, 255, 256, 257, 4096, 4097, 1 << 20, 16 << 20, 16<<20 + 1, 40 << 20} {
		b := p.Get(size)
		if len(*b) != size {
			t.Fatalf("Get(%d): len %d", size, len(*b))
		}
		if tr := tier(size); tr >= 0 && cap(*b) != 1<<(tr+minTierShift) {
			t.Fatalf("Get(%d): cap %d, want the tier's %d", size, cap(*b), 1<<(tr+minTierShift))
		}
		for i := range *b {
			(*b)[i] = 0xAA
		}
		p.Put(b)
		// A buffer of another size must never come back from the wrong tier.
		again := p.Get(size)
		if len(*again) != size || cap(*again) < size {
			t.Fatalf("Get(%d) after Put: len %d cap %d", size, len(*again), cap(*again))
		}
		p.Put(again)
	}
	// Foreign buffers (capacity not a tier size) are dropped, not pooled.
	odd := make([]byte, 300)
	p.Put(&odd)
	if b := p.Get(300); cap(*b) != 512 {
		t.Fatalf("foreign buffer reused: cap %d", cap(*b))
	}
}
