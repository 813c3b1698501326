package pebble

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/protobase/protobase/internal/keyspace"
)

// TestBatchBufferReused applies batches over 1 MiB, of main keys and of
// index entries, through one Batch Reset between them: from the second on,
// each writes into the buffers of the one before (which Pebble dropped at
// Reset and the store kept), and the store holds every batch's writes.
// A batch over 1 MiB that is Reset without a pool grows from nothing, into
// new buffers, every time.
func TestBatchBufferReused(t *testing.T) {
	s := openT(t, t.TempDir(), true)
	b := s.NewBatch()
	defer b.Close()
	const rounds, keys = 4, 400
	// Index values of about 2.8 KB and main values of 1 KB: the index
	// batch is over 1 MiB, and the main one, which also holds the index
	// batch as its journal entry, under half the test's 4 MiB memtable
	// (Pebble hands a larger batch to the memtables whole, buffer and all).
	val := func(round, i int, n int) []byte { return bytes.Repeat(fmt.Appendf(nil, "%d-%03d;", round, i), n) }
	mainKey := func(round, i int) []byte { return fmt.Appendf(nil, "m%d-%03d", round, i) }
	indexKey := func(round, i int) []byte {
		return append(keyspace.IndexPrefix(1), fmt.Appendf(nil, "x%d-%03d", round, i)...)
	}
	var mainBuf, indexBuf *byte
	for round := range rounds {
		b.Stamp(uint64(round + 1))
		for i := range keys {
			b.Set(mainKey(round, i), val(round, i, 160))
			b.Set(indexKey(round, i), val(round, i, 450))
		}
		if err := s.Commit(b); err != nil {
			t.Fatal(err)
		}
		m, x := unsafe.SliceData(b.pb.Repr()), unsafe.SliceData(b.ib.Repr())
		// The two buffers are of a size: either batch may take either.
		if round > 0 && (m != mainBuf || x != indexBuf) && (m != indexBuf || x != mainBuf) {
			t.Errorf("round %d: new buffers, want those of the round before", round)
		}
		mainBuf, indexBuf = m, x
		b.Reset()
		if b.pbWant <= retainedBytes || b.ibWant <= retainedBytes {
			t.Fatalf("round %d: after Reset the batch wants %d and %d bytes, more than %d each", round, b.pbWant, b.ibWant, retainedBytes)
		}
	}
	for round := range rounds {
		for _, i := range []int{0, keys / 2, keys - 1} {
			for k, want := range map[string][]byte{string(mainKey(round, i)): val(round, i, 160), string(indexKey(round, i)): val(round, i, 450)} {
				if v, ok := mustGet(t, s, k); !ok || v != string(want) {
					t.Errorf("%q: %d bytes, found %v; want %d bytes", k, len(v), ok, len(want))
				}
			}
		}
	}
}

// TestBatchBufsBound keeps only buffers a batch would drop, within
// pooledBatchBytes in all, and hands out empty batch buffers.
func TestBatchBufsBound(t *testing.T) {
	var p batchBufs
	p.put(make([]byte, 0, retainedBytes))
	if p.bytes != 0 {
		t.Errorf("a buffer of %d bytes, which a batch keeps itself, was kept", retainedBytes)
	}
	for range 100 {
		p.put(make([]byte, 5<<20, 6<<20))
	}
	if want := pooledBatchBytes / (6 << 20) * (6 << 20); p.bytes != want || len(p.bufs) != pooledBatchBytes/(6<<20) {
		t.Errorf("kept %d buffers of %d bytes, want %d bytes", len(p.bufs), p.bytes, want)
	}
	for _, tc := range []struct {
		n       int
		fromBuf bool
	}{{2 << 20, true}, {6 << 20, true}, {7 << 20, false}} {
		before := p.bytes
		buf := p.get(tc.n)
		if len(buf) != batchHeaderLen || !bytes.Equal(buf, make([]byte, batchHeaderLen)) || cap(buf) < tc.n {
			t.Errorf("get(%d): len %d, cap %d, header % x; want an empty batch with room", tc.n, len(buf), cap(buf), buf)
		}
		if kept := before - p.bytes; (kept > 0) != tc.fromBuf {
			t.Errorf("get(%d) took %d bytes from the pool, want a kept buffer: %v", tc.n, kept, tc.fromBuf)
		}
	}
}

// TestBatchBuffersShared has writers each apply large batches through a
// Batch of their own, at once: the buffers they hand each other through
// the store never hold two batches' writes at a time, so every key reads
// back with the value its writer gave it.
func TestBatchBuffersShared(t *testing.T) {
	s := openT(t, t.TempDir(), false)
	const writers, rounds, keys = 4, 6, 300
	val := func(w, round, i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "%d/%d/%03d;", w, round, i), 500) }
	key := func(w, round, i int) []byte {
		return append(keyspace.IndexPrefix(uint32(w)), fmt.Appendf(nil, "%d-%03d", round, i)...)
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			b := s.NewBatch()
			defer b.Close()
			for round := range rounds {
				for i := range keys { // about 1.2 MB of index writes a round
					b.Set(key(w, round, i), val(w, round, i))
				}
				if err := s.Commit(b); err != nil {
					errs <- err
					return
				}
				b.Reset()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := contents(t, s)
	for w := range writers {
		for round := range rounds {
			for i := range keys {
				if v := got[string(key(w, round, i))]; v != string(val(w, round, i)) {
					t.Fatalf("writer %d, round %d, key %d: %.40q..., want %.40q...", w, round, i, v, val(w, round, i))
				}
			}
		}
	}
	if n := len(got); n < writers*rounds*keys {
		t.Errorf("the store holds %d keys, want at least %d", n, writers*rounds*keys)
	}
}
