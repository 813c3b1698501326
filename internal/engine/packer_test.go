package engine

import (
	"bytes"
	"fmt"
	"testing"
)

// TestPackerValuesStayPut: every packed value keeps its bytes however the
// packer goes on (more records, reads into its tail, cuts), and none can
// be appended to in place.
func TestPackerValuesStayPut(t *testing.T) {
	p := &packer{slabSize: 4, maxBuf: 64}
	src := make([]byte, 0, 32)
	var want [][]byte
	var got [][]byte
	for i := range 100 {
		rec := fmt.Appendf(src[:0], "record-%d", i)
		switch i % 4 {
		case 0: // a scanned record: the source buffer is reused after
			got = append(got, p.pack("t", rec, 16).Value)
		case 1: // a point read appended at the tail
			val := append(p.tail(), rec...)
			p.readInto(val)
			got = append(got, p.pack("t", val, len(val)).Value)
		case 2: // a point read that was filtered out, then a scanned record
			p.readInto(append(p.tail(), "filtered-out"...))
			got = append(got, p.pack("t", rec, 1000).Value)
		case 3:
			got = append(got, p.pack("t", rec, len(rec)).Value)
			p.cut()
		}
		want = append(want, bytes.Clone(rec))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("value %d = %q, want %q", i, got[i], want[i])
		}
		if cap(got[i]) != len(got[i]) {
			t.Fatalf("value %d has spare capacity %d", i, cap(got[i])-len(got[i]))
		}
	}
}

// TestPackerPointReadsNotCopied: a point read landing in the packer's
// buffer is handed out where it lies.
func TestPackerPointReadsNotCopied(t *testing.T) {
	p := &packer{slabSize: 8, maxBuf: 1 << 10}
	p.pack("t", []byte("first"), 1<<10) // makes the buffer
	val := append(p.tail(), "second"...)
	p.readInto(val)
	a := p.pack("t", val, len(val))
	if &a.Value[0] != &val[0] {
		t.Fatal("a value read into the tail was copied")
	}
	// A lone lookup whose value the store had to allocate is adopted.
	q := &packer{slabSize: 1, maxBuf: 1 << 10}
	val = append(q.tail(), "lone"...)
	q.readInto(val)
	if a := q.pack("t", val, len(val)); &a.Value[0] != &val[0] {
		t.Fatal("a lone lookup's value was copied")
	}
}

// TestPackerSlabsGrow: a packer whose first slab was sized for one record
// (a Search chunk of one query) does not allocate an Any per record when
// the query is a range of a thousand.
func TestPackerSlabsGrow(t *testing.T) {
	rec := []byte("a record of some thirty bytes..")
	allocs := testing.AllocsPerRun(5, func() {
		p := &packer{slabSize: 1, maxBuf: 64 << 10}
		for range 1000 {
			p.pack("t", rec, 64<<10)
		}
	})
	// Slabs of 1, 2, 4 ... 256, then 256 at a time: 11; the values take one
	// buffer of 64 KiB.
	if allocs > 20 {
		t.Fatalf("%v allocations for 1,000 records", allocs)
	}
}
