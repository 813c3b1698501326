// Package grpcbuf owns the buffer pool Protobase's gRPC server and client
// hand to grpc-go in place of its default one (see Pool).
package grpcbuf

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// Pool is the buffer pool our gRPC server and client hand to grpc-go
// instead of its default one. The default zeroes every buffer it
// hands out; grpc-go fills the buffers it asks for completely (a message
// read off the wire, a message marshalled into it), so the zeroing is pure
// cost, and on a Search stream of point lookups it was 7% of the CPU
// profile. Everything else is the default's design: power-of-two tiers,
// each a sync.Pool, so idle buffers are released by the GC.
//
// Pool is safe for concurrent use. A buffer from Get holds whatever
// its last user left in it; callers must overwrite what they read.
var Pool mem.BufferPool = newDirtyPool()

const (
	minTierShift = 8  // 256 B
	maxTierShift = 24 // 16 MiB; larger buffers are not pooled
)

type dirtyPool struct {
	tiers [maxTierShift - minTierShift + 1]sync.Pool
}

func newDirtyPool() *dirtyPool { return &dirtyPool{} }

// tier returns the index of the smallest tier holding size bytes, or -1.
func tier(size int) int {
	if size <= 1<<minTierShift {
		return 0
	}
	shift := bits.Len(uint(size - 1))
	if shift > maxTierShift {
		return -1
	}
	return shift - minTierShift
}

func (p *dirtyPool) Get(size int) *[]byte {
	t := tier(size)
	if t < 0 {
		b := make([]byte, size)
		return &b
	}
	if bp, ok := p.tiers[t].Get().(*[]byte); ok {
		*bp = (*bp)[:size]
		return bp
	}
	b := make([]byte, size, 1<<(t+minTierShift))
	return &b
}

func (p *dirtyPool) Put(bp *[]byte) {
	c := cap(*bp)
	t := tier(c)
	if t < 0 || c != 1<<(t+minTierShift) {
		return // not one of ours: let the GC have it
	}
	p.tiers[t].Put(bp)
}
