package engine

import (
	"sync"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// respArena lends a chunk run inline the messages of its responses, and
// takes them back once each response is sent (responder.flush): a stream
// of batched lookups then allocates no message per query. It is only for
// a Send that encodes before it returns (an EncodingSink), and only
// for requests run on the receiving goroutine, where nothing else holds a
// response. Arenas are pooled (arenas), so the memory
// follows the chunks running, not the streams open.
//
// The slabs grow by replacement: a slab that runs out mid-response is
// replaced by one twice its size, and the messages already handed out stay
// in the old one until the response is sent.
type respArena struct {
	resp    pb.SearchResponse
	batches []pb.ResultBatch
	dones   []pb.QueryDone
	lists   []*anypb.Any // one-record lists (see responder.first)
	// nb, nd, nl count what the current response took of each slab.
	nb, nd, nl int
	pk         packer
}

// arenas pools the engine's respArenas; idle ones go with the GC.
var arenas = sync.Pool{New: func() any { return &respArena{pk: packer{maxBuf: 64 << 10, reuse: true}} }}

// start readies a for a chunk whose slabs start at slabSize.
func (a *respArena) start(slabSize int) {
	a.rewind()
	a.pk.slabSize = slabSize
	a.pk.cut()
}

// rewind takes back every message of the last response.
func (a *respArena) rewind() {
	a.resp.Results = a.resp.Results[:0]
	a.resp.Done = a.resp.Done[:0]
	a.resp.Errors = nil
	a.nb, a.nd, a.nl = 0, 0, 0
}

// grow returns the slab size after one of n ran out.
func grow(n int) int { return max(64, 2*n) }

func (a *respArena) batch(id uint64) *pb.ResultBatch {
	if a.nb == len(a.batches) {
		a.batches, a.nb = make([]pb.ResultBatch, grow(len(a.batches))), 0
	}
	b := &a.batches[a.nb]
	a.nb++
	b.Query, b.Records, b.Plan, b.Versions = id, nil, nil, nil
	return b
}

func (a *respArena) done(id, count uint64) *pb.QueryDone {
	if a.nd == len(a.dones) {
		a.dones, a.nd = make([]pb.QueryDone, grow(len(a.dones))), 0
	}
	d := &a.dones[a.nd]
	a.nd++
	d.Query, d.Count, d.Plan = id, count, nil
	return d
}

func (a *respArena) first(rec *anypb.Any) []*anypb.Any {
	if a.nl == len(a.lists) {
		a.lists, a.nl = make([]*anypb.Any, grow(len(a.lists))), 0
	}
	l := a.lists[a.nl : a.nl+1 : a.nl+1]
	a.nl++
	l[0] = rec
	return l
}
