package wire

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// frames reads the top-level fields of a message held in several buffers
// (the transport hands a watch response of ~200 KB over as the HTTP/2
// frames it arrived in, 16 KB each) without joining them: a field that
// lies within one buffer is a slice of it, and only a field that crosses
// from one buffer into the next is copied, into spill. Joining the
// buffers would copy every response once more.
type frames struct {
	bufs [][]byte // the buffers after cur
	cur  []byte   // the rest of the current buffer
	left int      // bytes left in cur and bufs
	// spill receives fields that cross buffers; a new array is taken when
	// it is full, never one written over, since fields handed out alias it.
	spill []byte
}

// maxVarintLen is the longest varint, in bytes.
const maxVarintLen = 10

// newFrames reads bufs, whose lengths add up to total.
func newFrames(bufs [][]byte, total int) frames {
	f := frames{bufs: bufs, left: total}
	f.advance()
	return f
}

// advance makes cur the next non-empty buffer when it is empty.
func (f *frames) advance() {
	for len(f.cur) == 0 && len(f.bufs) > 0 {
		f.cur, f.bufs = f.bufs[0], f.bufs[1:]
	}
}

// varint reads a varint as protowire.ConsumeVarint would; false when
// malformed or cut short.
func (f *frames) varint() (uint64, bool) {
	if len(f.cur) >= maxVarintLen {
		v, n := protowire.ConsumeVarint(f.cur)
		if n < 0 {
			return 0, false
		}
		f.cur, f.left = f.cur[n:], f.left-n
		f.advance()
		return v, true
	}
	var v uint64
	for i := range maxVarintLen {
		if len(f.cur) == 0 {
			return 0, false
		}
		c := f.cur[0]
		f.cur, f.left = f.cur[1:], f.left-1
		f.advance()
		if i == maxVarintLen-1 && c > 1 {
			return 0, false // overflows 64 bits
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, true
		}
	}
	return 0, false
}

// field reads the next field, which must be length-delimited: its number
// and its bytes (aliasing a buffer, or spill when keep is set, else nil
// when it crosses buffers: a pass that only counts). ok is false when the
// message is malformed or holds another wire type.
func (f *frames) field(keep bool) (num protowire.Number, v []byte, ok bool) {
	// A tag of one byte and a length of one or two, within the buffer:
	// every change of a response of small records.
	if c := f.cur; len(c) >= 3 && c[0] < 0x80 && c[0]&7 == byte(protowire.BytesType) && c[0]>>3 != 0 {
		l, h := int(c[1]), 2
		if l >= 0x80 && c[2] < 0x80 {
			l, h = l&0x7f|int(c[2])<<7, 3
		}
		if l < 0x80 || h == 3 {
			if l <= len(c)-h {
				f.cur, f.left = c[h+l:], f.left-h-l
				f.advance()
				return protowire.Number(c[0] >> 3), c[h : h+l : h+l], true
			}
		}
	}
	tag, ok := f.varint()
	if !ok {
		return 0, nil, false
	}
	num, typ := protowire.DecodeTag(tag)
	if num < protowire.MinValidNumber || num > protowire.MaxValidNumber || typ != protowire.BytesType {
		return 0, nil, false
	}
	l64, ok := f.varint()
	if !ok || l64 > uint64(f.left) {
		return 0, nil, false
	}
	l := int(l64)
	if l <= len(f.cur) {
		v, f.cur, f.left = f.cur[:l:l], f.cur[l:], f.left-l
		f.advance()
		return num, v, true
	}
	if keep {
		if cap(f.spill)-len(f.spill) < l {
			f.spill = make([]byte, 0, max(l, 32<<10))
		}
		start := len(f.spill)
		for need := l; need > 0; {
			n := min(need, len(f.cur))
			f.spill = append(f.spill, f.cur[:n]...)
			f.cur, need = f.cur[n:], need-n
			f.advance()
		}
		f.left -= l
		return num, f.spill[start:len(f.spill):len(f.spill)], true
	}
	for need := l; need > 0; {
		n := min(need, len(f.cur))
		f.cur, need = f.cur[n:], need-n
		f.advance()
	}
	f.left -= l
	return num, nil, true
}
