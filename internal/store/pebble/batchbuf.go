package pebble

import "sync"

// A Pebble batch keeps its buffer through Reset only up to 1 MiB (its
// default); a larger one is dropped, and the batch's next contents grow
// from nothing by doubling. A stream's batches are mostly of one size, so
// a stream of 1,000 records of 1 KiB with an index on a repeated field
// would allocate and copy about 4 MB a batch, and the fresh memory costs
// more than the copies (page faults, the collector). The store keeps the
// buffers of such batches, up to pooledBatchBytes in all, and a Reset
// batch takes one back at its first write, of at least the size it had.

// retainedBytes is the largest buffer a Pebble batch keeps through Reset.
const retainedBytes = 1 << 20

// pooledBatchBytes bounds the buffers the store keeps for reuse, in all:
// a few streams' batches of several MiB each.
const pooledBatchBytes = 64 << 20

// batchHeaderLen is the size of a Pebble batch's header (its sequence
// number and count), which an empty batch's buffer holds.
const batchHeaderLen = 12

// batchBufs is the store's pool of large batch buffers; mu guards the rest.
type batchBufs struct {
	mu    sync.Mutex
	bufs  [][]byte
	bytes int // sum of the bufs' capacities
}

// put keeps buf for reuse if it is larger than a batch keeps by itself and
// fits in the pool.
func (p *batchBufs) put(buf []byte) {
	c := cap(buf)
	if c <= retainedBytes {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bytes+c > pooledBatchBytes {
		return
	}
	p.bufs = append(p.bufs, buf[:0])
	p.bytes += c
}

// get returns an empty batch buffer (a zero header) with room for n bytes:
// the most recently kept one large enough, or a new one.
func (p *batchBufs) get(n int) []byte {
	p.mu.Lock()
	for i := len(p.bufs) - 1; i >= 0; i-- {
		if buf := p.bufs[i]; cap(buf) >= n {
			last := len(p.bufs) - 1
			p.bufs[i], p.bufs[last] = p.bufs[last], nil
			p.bufs = p.bufs[:last]
			p.bytes -= cap(buf)
			p.mu.Unlock()
			return append(buf, make([]byte, batchHeaderLen)...)
		}
	}
	p.mu.Unlock()
	return make([]byte, batchHeaderLen, n)
}
