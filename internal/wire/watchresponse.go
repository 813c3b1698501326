package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// A WatchResponse carries up to 1,000 changes by default, and a watcher
// of a busy database receives hundreds of thousands a second. The
// generated decoder allocates about ten times per change (the Change, its
// type name, two or three Anys with their type URLs and copied values,
// the Position and its index): on the 2 cores the writer and the watcher
// share, that decoding is part of what a watcher costs the writer. This
// decoder decodes a WatchResponse as DecodeScanResponse does a
// ScanResponse: every record's value pointing into the response's bytes,
// the Changes with their Positions in one slab, the Anys in another, one
// string per distinct type name and type URL. A change kept by the caller
// keeps its whole response's bytes alive.
//
// Only the common shape is taken (known fields with their wire types,
// each message field of a Change at most once, Anys holding only type_url
// and value); anything else goes to proto.Unmarshal whole, so that the
// result and the error are always proto.Unmarshal's (FuzzDecodeWatchResponse
// checks it).

// changeSlot is one decoded change with its position, so that both come
// from one slab.
type changeSlot struct {
	c   pb.Change
	pos posSlot
}

// posSlot is a Position with the storage of its optional index.
type posSlot struct {
	p     pb.Position
	index uint32
}

// WatchSlabs are the storage of one decoded response: the copy of its
// bytes, the changes with their positions, their pointers, the Anys and
// the progress. A Watcher whose caller takes changes by NextBatch lends
// them only until its next call, and then decodes the next response into
// the same slabs; otherwise each response gets new ones.
type WatchSlabs struct {
	spill []byte // fields of a reused response that crossed buffers
	slots []changeSlot
	ptrs  []*pb.Change
	anys  []anypb.Any
	prog  *posSlot
	// The changes and Anys of the last response, the sizes of new slabs.
	changes, anysUsed int
	// The slots and Anys at the start of their slabs handed out since
	// they were last cleared: cleared at once (not one at a time, which
	// cost a tenth of the decoding) by the next response.
	dirtySlots, dirtyAnys int
	// The last type name and URL decoded, valid UTF-8, which the next
	// response shares (strings are immutable: reused either way).
	lastType, lastURL string
}

// Renew leaves s's storage to the changes decoded into it, which the
// caller keeps, and readies s for new storage of the same sizes, sharing
// the same strings.
func (s *WatchSlabs) Renew() {
	*s = WatchSlabs{changes: s.changes, anysUsed: s.anysUsed, lastType: s.lastType, lastURL: s.lastURL}
}

// Decode decodes the WatchResponse held in bufs (total bytes, in order)
// into m, using the slabs s, and reports whether it had the common shape;
// on false m is left for proto.Unmarshal to reset and decode. m's changes
// point into bufs, and into s's storage for the fields that cross from one
// buffer into the next.
func (s *WatchSlabs) Decode(bufs [][]byte, total int, m *pb.WatchResponse) bool {
	f := newFrames(bufs, total)
	f.spill = s.spill[:0]
	return decodeWatchFast(f, m, s)
}

// watchDecoder is the state of decoding one response: the slabs, and
// the strings its changes share.
type watchDecoder struct {
	s        *WatchSlabs
	used     int    // Anys used
	lastType string // the last type name, found valid UTF-8
	lastURL  string // the last type URL, found valid UTF-8
}

// DecodeWatchResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy.
func DecodeWatchResponse(b []byte, m *pb.WatchResponse) error {
	if !decodeWatchFast(newFrames([][]byte{b}, len(b)), m, new(WatchSlabs)) {
		return proto.Unmarshal(b, m)
	}
	return nil
}

// decodeWatchFast decodes b into m, using the slabs s, when b has the
// common shape; false leaves m to be reset by proto.Unmarshal.
//
// It reads a Watcher's responses once: counting the changes first, to
// size the slabs, was a sixth of the decoding. The slabs are the last
// response's (or, new, of its sizes); one that runs out is followed by a
// larger one, the changes decoded before keeping theirs. Only a response
// with no response before it to go by is counted first.
func decodeWatchFast(f frames, m *pb.WatchResponse, s *WatchSlabs) bool {
	if s.changes == 0 && cap(s.slots) == 0 {
		s.changes = countChanges(f)
	}
	if cap(s.ptrs) < s.changes {
		s.ptrs = make([]*pb.Change, 0, s.changes)
	}
	clear(s.slots[:s.dirtySlots])
	clear(s.anys[:s.dirtyAnys])
	s.dirtySlots, s.dirtyAnys = 0, 0
	d := watchDecoder{s: s, lastType: s.lastType, lastURL: s.lastURL}
	s.ptrs = s.ptrs[:0]
	var prog *posSlot
	for f.left > 0 {
		num, v, ok := f.field(true)
		if !ok {
			return false
		}
		switch num {
		case WatchResponseChanges:
			slot := d.slot()
			if !d.change(v, slot) {
				return false
			}
			s.ptrs = append(s.ptrs, &slot.c)
		case WatchResponseProgress:
			// Repeated, proto.Unmarshal merges them: rare, left to it.
			if prog != nil {
				return false
			}
			if s.prog == nil {
				s.prog = new(posSlot)
			}
			prog = s.prog
			*prog = posSlot{}
			if !decodePosition(v, prog) {
				return false
			}
		default:
			return false
		}
	}
	n := len(s.ptrs)
	s.changes, s.anysUsed = n, d.used
	s.lastType, s.lastURL = d.lastType, d.lastURL
	s.spill = f.spill
	m.Reset()
	if n > 0 {
		m.Changes = s.ptrs[:n:n]
	}
	if prog != nil {
		m.Progress = &prog.p
	}
	return true
}

// countChanges counts the changes of a response, up to the first
// malformed field (the decoding finds it).
func countChanges(f frames) int {
	n := 0
	for f.left > 0 {
		num, _, ok := f.field(false)
		if !ok {
			break
		}
		if num == WatchResponseChanges {
			n++
		}
	}
	return n
}

// slot returns the next unused change slot, zero, taking a new slab
// when the slab is exhausted: the size of the last response's, at first,
// then twice the slab's.
func (d *watchDecoder) slot() *changeSlot {
	s := d.s
	if s.dirtySlots == len(s.slots) {
		s.slots, s.dirtySlots = make([]changeSlot, max(s.changes, 2*len(s.slots), 16)), 0
	}
	sl := &s.slots[s.dirtySlots]
	s.dirtySlots++
	return sl
}

// change decodes one Change into s.
func (d *watchDecoder) change(b []byte, s *changeSlot) bool {
	c := &s.c
	// The server's changes start with the op and the type name, each a
	// one-byte tag and a one-byte value or length: read inline.
	if len(b) >= 4 && b[0] == tagChangeOp && b[1] < 0x80 && b[2] == tagChangeType && b[3] < 0x80 && int(b[3]) <= len(b)-4 {
		v := b[4 : 4+b[3]]
		if string(v) != d.lastType {
			if !utf8.Valid(v) {
				return false
			}
			d.lastType = string(v)
		}
		c.Op, c.Type = pb.ChangeOp(b[1]), d.lastType
		b = b[4+len(v):]
	}
	for len(b) > 0 {
		num, typ, x, v, k := nextField(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		if typ == protowire.VarintType {
			switch num {
			case ChangeOp:
				c.Op = pb.ChangeOp(int32(x))
			case ChangeOldOmit:
				c.OldRecordOmitted = x != 0
			case ChangeRecOmit:
				c.RecordOmitted = x != 0
			case ChangeExpired:
				c.Expired = x != 0
			default:
				return false
			}
			continue
		}
		if typ != protowire.BytesType || !d.changeField(num, v, s) {
			return false
		}
	}
	return true
}

// changeField decodes field num of a Change, length-delimited, holding v,
// into s.
func (d *watchDecoder) changeField(num protowire.Number, v []byte, s *changeSlot) bool {
	c := &s.c
	switch num {
	case ChangeType:
		if string(v) != d.lastType {
			if !utf8.Valid(v) {
				return false
			}
			d.lastType = string(v)
		}
		c.Type = d.lastType
	case ChangeKey:
		return d.anyField(v, &c.Key)
	case ChangeRecord:
		return d.anyField(v, &c.Record)
	case ChangeOld:
		return d.anyField(v, &c.OldRecord)
	case ChangePosition:
		if c.Position != nil || !decodePosition(v, &s.pos) {
			return false
		}
		c.Position = &s.pos.p
	default:
		return false
	}
	return true
}

// anyField decodes the Any v into *field, which must not be set yet: a
// message field repeated on the wire is merged by proto.Unmarshal, and
// left to it.
func (d *watchDecoder) anyField(v []byte, field **anypb.Any) bool {
	if *field != nil {
		return false
	}
	a := d.any()
	if !DecodeAny(v, a, &d.lastURL) {
		return false
	}
	*field = a
	return true
}

// any returns the next unused Any, zero, taking a new slab when the slab
// is exhausted, as slot does (a key and a record a change, mostly).
func (d *watchDecoder) any() *anypb.Any {
	s := d.s
	if s.dirtyAnys == len(s.anys) {
		s.anys, s.dirtyAnys = make([]anypb.Any, max(s.anysUsed, 2*s.changes, 2*len(s.anys), 32)), 0
	}
	a := &s.anys[s.dirtyAnys]
	s.dirtyAnys++
	d.used++
	return a
}

// decodePosition decodes one Position into s.
func decodePosition(b []byte, s *posSlot) bool {
	// The server's shape: the commit, then the index, each a one-byte tag
	// and a varint of a few bytes, read inline (a position a change).
	if len(b) >= 4 && b[0] == tagPosCommit {
		c, n := shortVarint(b[1:])
		if n > 0 && len(b) > 2+n && b[1+n] == tagPosIndex {
			i, m := shortVarint(b[2+n:])
			if m > 0 && 2+n+m == len(b) {
				s.p.Commit, s.index = c, uint32(i)
				s.p.Index = &s.index
				return true
			}
		}
	}
	for len(b) > 0 {
		num, typ, v, _, k := nextField(b)
		if k < 0 || typ != protowire.VarintType {
			return false
		}
		b = b[k:]
		switch num {
		case PositionCommit:
			s.p.Commit = v
		case PositionIndex:
			s.index = uint32(v)
			s.p.Index = &s.index
		default:
			return false
		}
	}
	return true
}

// Tags of the fields read inline, one byte each.
const (
	tagChangeOp   = byte(ChangeOp)<<3 | byte(protowire.VarintType)
	tagChangeType = byte(ChangeType)<<3 | byte(protowire.BytesType)
	tagPosCommit  = byte(PositionCommit)<<3 | byte(protowire.VarintType)
	tagPosIndex   = byte(PositionIndex)<<3 | byte(protowire.VarintType)
)

// shortVarint reads a varint of at most four bytes from the start of b,
// and its length; 0 when b starts with none (cut short or longer).
func shortVarint(b []byte) (uint64, int) {
	switch {
	case len(b) >= 1 && b[0] < 0x80:
		return uint64(b[0]), 1
	case len(b) >= 2 && b[1] < 0x80:
		return uint64(b[0]&0x7f) | uint64(b[1])<<7, 2
	case len(b) >= 3 && b[2] < 0x80:
		return uint64(b[0]&0x7f) | uint64(b[1]&0x7f)<<7 | uint64(b[2])<<14, 3
	case len(b) >= 4 && b[3] < 0x80:
		return uint64(b[0]&0x7f) | uint64(b[1]&0x7f)<<7 | uint64(b[2]&0x7f)<<14 | uint64(b[3])<<21, 4
	}
	return 0, 0
}

// nextField reads the first field of b: its number, its wire type, its
// value (x for a varint, v for a length-delimited field) and its length
// n, negative when b is malformed or the type is neither. Fields of a
// one-byte tag and a one-byte value or length, most of a change's, are
// read without protowire's general decoding: a watcher decodes hundreds
// of thousands of changes a second on the cores the database may share.
func nextField(b []byte) (num protowire.Number, typ protowire.Type, x uint64, v []byte, n int) {
	if len(b) >= 2 && b[0] < 0x80 && b[0]>>3 != 0 && b[1] < 0x80 {
		num, typ = protowire.Number(b[0]>>3), protowire.Type(b[0]&7)
		switch typ {
		case protowire.VarintType:
			return num, typ, uint64(b[1]), nil, 2
		case protowire.BytesType:
			if l := int(b[1]); l <= len(b)-2 {
				return num, typ, 0, b[2 : 2+l], 2 + l
			}
			return 0, 0, 0, nil, -1
		}
	}
	// A length of two bytes after a one-byte tag: a record of 128 bytes
	// or more (with its Any's type URL, most records).
	if len(b) >= 3 && b[0] < 0x80 && b[0]>>3 != 0 && b[0]&7 == byte(protowire.BytesType) && b[1] >= 0x80 && b[2] < 0x80 {
		if l := int(b[1]&0x7f) | int(b[2])<<7; l <= len(b)-3 {
			return protowire.Number(b[0] >> 3), protowire.BytesType, 0, b[3 : 3+l], 3 + l
		}
		return 0, 0, 0, nil, -1
	}
	// A varint of two or three bytes after a one-byte tag: a position's
	// commit and index, mostly.
	if len(b) >= 4 && b[0] < 0x80 && b[0]>>3 != 0 && b[0]&7 == byte(protowire.VarintType) && b[1] >= 0x80 {
		if b[2] < 0x80 {
			return protowire.Number(b[0] >> 3), protowire.VarintType, uint64(b[1]&0x7f) | uint64(b[2])<<7, nil, 3
		}
		if b[3] < 0x80 {
			return protowire.Number(b[0] >> 3), protowire.VarintType, uint64(b[1]&0x7f) | uint64(b[2]&0x7f)<<7 | uint64(b[3])<<14, nil, 4
		}
	}
	return nextFieldSlow(b)
}

// nextFieldSlow is nextField for any field, through protowire.
func nextFieldSlow(b []byte) (num protowire.Number, typ protowire.Type, x uint64, v []byte, n int) {
	num, typ, l := protowire.ConsumeTag(b)
	if l < 0 {
		return 0, 0, 0, nil, -1
	}
	switch typ {
	case protowire.VarintType:
		x, k := protowire.ConsumeVarint(b[l:])
		if k < 0 {
			return 0, 0, 0, nil, -1
		}
		return num, typ, x, nil, l + k
	case protowire.BytesType:
		v, k := protowire.ConsumeBytes(b[l:])
		if k < 0 {
			return 0, 0, 0, nil, -1
		}
		return num, typ, 0, v, l + k
	}
	return 0, 0, 0, nil, -1
}
