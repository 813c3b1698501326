package engine

import (
	"google.golang.org/protobuf/types/known/anypb"
)

// packer turns the records a cursor emits into the Any messages of a
// response, for Search, Scan and Query alike. It belongs to one goroutine.
//
// Values share one buffer: each record is appended behind the previous
// ones and handed out as a slice capped at its own length, so a slice once
// handed out is never written again, and a response's values cost one
// allocation per buffer instead of one per record. Any messages come from
// slabs for the same reason: the first of slabSize, each next one twice
// the last, up to maxSlab, so that a caller who sized the first for one
// record (a Search chunk of one query) does not pay an allocation per
// record when the query is a range. Nothing handed out is reused.
//
// Point reads skip the copy: the cursor reads a lookup's value straight
// into tail, the free end of the buffer, and pack then only extends the
// buffer over it. When the value did not fit there, the store allocated it
// for this read alone, and pack adopts that allocation as the new buffer
// if it is as large as the buffer pack would have made.
type packer struct {
	slabSize int // Any messages allocated at a time
	maxBuf   int // largest values buffer made for records below this size

	slab []anypb.Any
	made int // the size of the last slab made
	vals []byte
	// read is the last value a point read appended at tail; pack may take
	// it without a copy.
	read []byte

	// reuse makes cut rewind instead of letting go: the next response's
	// Any messages and values are written over the last one's. Only for a
	// caller whose responses are encoded before it cuts (see respArena).
	// anys is then the slab, na how much of it is handed out, and packed
	// the values bytes packed since the last cut, which size the buffer
	// kept for the next response.
	reuse  bool
	anys   []anypb.Any
	na     int
	packed int
}

// maxSlab bounds the Any messages of one slab: 20 KiB.
const maxSlab = 256

// maxKeptValues bounds the values buffer a reusing packer keeps from one
// response to the next.
const maxKeptValues = 512 << 10

// tail returns where a point read may append the next value.
func (p *packer) tail() []byte { return p.vals[len(p.vals):] }

// readInto notes val, returned by a read that appended to tail.
func (p *packer) readInto(val []byte) { p.read = val }

// pack returns an Any of type url holding rec. want is how many bytes of
// values the caller expects to pack before its next cut (this record
// included); it sizes a new buffer, bounded by maxBuf.
func (p *packer) pack(url string, rec []byte, want int) *anypb.Any {
	var a *anypb.Any
	if p.reuse {
		if p.na == len(p.anys) {
			// The messages handed out stay in the old slab until sent.
			p.anys = make([]anypb.Any, max(p.slabSize, 2*len(p.anys)))
			p.na = 0
		}
		a = &p.anys[p.na]
		p.na++
		p.packed += len(rec)
	} else {
		if len(p.slab) == 0 {
			p.made = max(p.slabSize, min(2*p.made, maxSlab))
			p.slab = make([]anypb.Any, p.made)
		}
		a = &p.slab[0]
		p.slab = p.slab[1:]
	}
	a.TypeUrl = url
	a.Value = p.value(rec, want)
	return a
}

func (p *packer) value(rec []byte, want int) []byte {
	n := len(rec)
	read := p.read
	p.read = nil
	if n > 0 && len(read) == n && &read[0] == &rec[0] {
		free := p.tail()
		if cap(free) >= n && &free[:1][0] == &rec[0] {
			p.vals = p.vals[:len(p.vals)+n]
			return rec[:n:n]
		}
		if cap(rec) >= p.bufSize(n, want) {
			p.vals = rec
			return rec[:n:n]
		}
	}
	if cap(p.vals)-len(p.vals) < n {
		p.vals = make([]byte, 0, p.bufSize(n, want))
	}
	start := len(p.vals)
	p.vals = append(p.vals, rec...)
	return p.vals[start:len(p.vals):len(p.vals)]
}

// bufSize is the capacity of a new values buffer for a record of n bytes.
func (p *packer) bufSize(n, want int) int {
	return min(max(want, n), max(p.maxBuf, n))
}

// cut starts a new values buffer for the next response: the one handed
// off is no longer shared. A reusing packer rewinds instead, keeping one
// buffer as large as the last response needed (within maxKeptValues), so
// that the next response of the same size allocates nothing.
func (p *packer) cut() {
	if !p.reuse {
		p.vals = nil
		return
	}
	p.read = nil
	switch {
	case p.packed > maxKeptValues:
		// The messages handed out point into the buffer let go; cleared,
		// they do not keep it alive until they are written over.
		clear(p.anys[:p.na])
		p.vals = nil
	case p.packed > cap(p.vals):
		p.vals = make([]byte, 0, p.packed)
	default:
		p.vals = p.vals[:0]
	}
	p.packed, p.na = 0, 0
}
