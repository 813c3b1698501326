package recvbudget

import "encoding/binary"

// HTTP/2 framing, only as far as the accounting needs it (RFC 9113 §4.1,
// §6): every frame starts with a 9-byte header (24-bit payload length,
// type, flags, 31-bit stream id); the client's side starts with a 24-byte
// preface.
const (
	frameHeaderLen = 9
	prefaceLen     = 24 // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	msgPrefixLen   = 5  // gRPC: compressed flag, 32-bit big-endian length

	frameData    = 0x0
	frameHeaders = 0x1
	frameRST     = 0x3

	flagEndStream = 0x1
	flagPadded    = 0x8
)

// phase is where an inbound parser stands in the byte stream.
type phase uint8

const (
	phaseHeader phase = iota // collecting a frame header
	phasePadLen              // next byte is a DATA frame's pad length
	phaseData                // DATA payload bytes: gRPC message bytes
	phaseSkip                // bytes that do not matter: other payloads, padding
)

// stream is one open stream's gRPC message framing.
//
// Invariant: pn < msgPrefixLen, or pn == msgPrefixLen and body > 0 (a
// message whose prefix is complete is still arriving); held is the body
// bytes of that message received so far, 0 while pn < msgPrefixLen.
type stream struct {
	pn   int                // bytes of the current message's prefix seen
	pfx  [msgPrefixLen]byte // those bytes
	body int64              // body bytes of the current message still to come
	held int64
}

// inbound parses what a client sends on one connection and keeps, per
// open stream, the bytes of the gRPC message that has begun arriving and
// is not complete: what grpc-go buffers for the stream's handler and
// cannot yet hand it.
//
// Invariant: held is the sum of the held bytes of streams, and never
// negative. A stream is in streams from the client's HEADERS that opens it
// until it ends (see end); DATA on a stream not in streams is not counted,
// as grpc-go drops it. inbound is not safe for concurrent use.
type inbound struct {
	preface int // preface bytes still to skip
	ph      phase
	hn      int // bytes of hdr collected
	hdr     [frameHeaderLen]byte

	sid       uint32  // the current frame's stream
	cur       *stream // its state while it is DATA on an open stream, else nil
	endStream bool    // the current DATA frame ends its stream
	data      int     // DATA payload bytes still to come
	pad       int     // padding after them
	skip      int     // bytes to skip before the next frame header

	streams map[uint32]*stream
	spare   []*stream // ended streams' states, reused by new ones
	held    int64
}

func newInbound() inbound {
	return inbound{preface: prefaceLen, streams: make(map[uint32]*stream)}
}

// feed parses p, the next bytes the client sent.
func (in *inbound) feed(p []byte) {
	for len(p) > 0 {
		switch in.ph {
		case phaseHeader:
			if in.preface > 0 {
				k := min(len(p), in.preface)
				in.preface -= k
				p = p[k:]
				continue
			}
			k := copy(in.hdr[in.hn:], p)
			in.hn += k
			p = p[k:]
			if in.hn == frameHeaderLen {
				in.hn = 0
				in.begin()
			}
		case phasePadLen:
			in.pad = int(p[0])
			p = p[1:]
			if in.pad > in.data-1 { // a protocol error grpc-go closes on: skip the frame
				in.pad, in.data = in.data-1, 0
			} else {
				in.data -= 1 + in.pad
			}
			in.ph = phaseData
			in.settle()
		case phaseData:
			k := min(len(p), in.data)
			if in.cur != nil {
				in.message(in.cur, p[:k])
			}
			in.data -= k
			p = p[k:]
			in.settle()
		case phaseSkip:
			k := min(len(p), in.skip)
			in.skip -= k
			p = p[k:]
			in.settle()
		}
	}
}

// begin acts on the frame header just collected.
func (in *inbound) begin() {
	h := &in.hdr
	length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	typ, flags := h[3], h[4]
	in.sid = binary.BigEndian.Uint32(h[5:9]) & 0x7fffffff
	in.cur, in.endStream, in.data, in.pad, in.skip = nil, false, 0, 0, 0
	switch typ {
	case frameData:
		in.cur = in.streams[in.sid]
		in.endStream = flags&flagEndStream != 0
		in.data = length
		in.ph = phaseData
		if flags&flagPadded != 0 && length > 0 {
			in.ph = phasePadLen
		}
		in.settle()
		return
	case frameHeaders:
		switch {
		case flags&flagEndStream != 0:
			in.end(in.sid)
		case in.sid != 0 && in.streams[in.sid] == nil:
			in.open(in.sid)
		}
	case frameRST:
		in.end(in.sid)
	}
	in.skip = length
	in.ph = phaseSkip
	in.settle()
}

// settle moves past the parts of the current frame that are done, and
// past the frame when all of it is.
func (in *inbound) settle() {
	if in.ph == phaseData && in.data == 0 {
		in.skip, in.pad = in.pad, 0
		in.ph = phaseSkip
	}
	if in.ph == phaseSkip && in.skip == 0 {
		if in.endStream {
			in.end(in.sid)
			in.endStream = false
		}
		in.cur = nil
		in.ph = phaseHeader
	}
}

// message feeds DATA bytes of st, which hold gRPC message prefixes and
// bodies one after another.
func (in *inbound) message(st *stream, p []byte) {
	for len(p) > 0 {
		if st.pn < msgPrefixLen {
			k := copy(st.pfx[st.pn:], p)
			st.pn += k
			p = p[k:]
			if st.pn == msgPrefixLen {
				st.body = int64(binary.BigEndian.Uint32(st.pfx[1:]))
				if st.body == 0 {
					st.pn = 0
				}
			}
			continue
		}
		k := min(int64(len(p)), st.body)
		st.body -= k
		st.held += k
		in.held += k
		p = p[k:]
		if st.body == 0 { // the message is complete: grpc-go hands it over
			in.held -= st.held
			st.held, st.pn = 0, 0
		}
	}
}

// open starts accounting stream sid.
func (in *inbound) open(sid uint32) {
	var st *stream
	if n := len(in.spare); n > 0 {
		st = in.spare[n-1]
		in.spare = in.spare[:n-1]
	} else {
		st = new(stream)
	}
	in.streams[sid] = st
}

// end releases stream sid: it ended (END_STREAM from the client,
// RST_STREAM either way, the server's trailers), so grpc-go no longer
// holds its bytes. Ending a stream that is not open does nothing.
func (in *inbound) end(sid uint32) {
	st := in.streams[sid]
	if st == nil {
		return
	}
	delete(in.streams, sid)
	if in.cur == st {
		in.cur = nil
	}
	in.held -= st.held
	*st = stream{}
	in.spare = append(in.spare, st)
}

// outbound finds, in what the server sends on a connection, the frames
// that end a stream: RST_STREAM, and HEADERS with END_STREAM (a gRPC
// server's trailers). It is not safe for concurrent use.
type outbound struct {
	hn   int
	hdr  [frameHeaderLen]byte
	skip int // payload bytes of the current frame still to come
}

// scan parses a prefix of p and returns its length; ended reports that
// the prefix's last frame header ends stream sid (scan stops there so the
// caller can act on it, then calls scan again on the rest).
func (out *outbound) scan(p []byte) (n int, sid uint32, ended bool) {
	for n < len(p) {
		if out.skip > 0 {
			k := min(len(p)-n, out.skip)
			out.skip -= k
			n += k
			continue
		}
		k := copy(out.hdr[out.hn:], p[n:])
		out.hn += k
		n += k
		if out.hn < frameHeaderLen {
			continue
		}
		out.hn = 0
		h := &out.hdr
		out.skip = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags := h[3], h[4]
		if typ == frameRST || (typ == frameHeaders && flags&flagEndStream != 0) {
			return n, binary.BigEndian.Uint32(h[5:9]) & 0x7fffffff, true
		}
	}
	return n, 0, false
}
