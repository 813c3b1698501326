package watch

import (
	"encoding/binary"
	"math/bits"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/grpcbuf"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/wire"
)

// A watcher writes its WatchResponses as wire bytes, straight from the
// log entry's record bytes, into a buffer of grpcbuf.Pool: the server's
// codec passes them through as a grpcbuf.Frame. Building pb.Change and
// anypb.Any messages and marshalling them was a quarter of the server's
// CPU with ten watchers. The bytes decode to the message the
// builder made (TestWatchEncodeMatchesProto); fields are written in
// field-number order, as proto.Marshal does.

// watchBufSize is the least capacity a response's buffer starts with.
// It starts at the size of the watcher's previous response (a watcher
// that is behind sends full ones), and grows by taking a pool buffer of
// twice the size: growing by append copied every byte again and again
// and was a fifth of the CPU with ten watchers.
const watchBufSize = 4 << 10

// respEnc is the response a watcher is building: its changes so far, as
// repeated field 1 of WatchResponse. It belongs to the watcher.
type respEnc struct {
	bp   *[]byte // from grpcbuf.Pool while a response is open, else nil
	n    int     // changes in the response
	key  []byte  // scratch for a change's key, reused
	last int     // size of the previous response
}

// open reports whether a response is being built.
func (r *respEnc) open() bool { return r.bp != nil }

func (r *respEnc) start() {
	r.bp = grpcbuf.Pool.Get(max(watchBufSize, r.last+r.last/8))
	*r.bp = (*r.bp)[:0]
	r.n = 0
}

// reserve makes room for n more bytes.
func (r *respEnc) reserve(n int) {
	b := *r.bp
	if cap(b)-len(b) >= n {
		return
	}
	nb := grpcbuf.Pool.Get(max(2*cap(b), len(b)+n))
	*nb = append((*nb)[:0], b...)
	grpcbuf.Pool.Put(r.bp)
	r.bp = nb
}

// changeFlags are a change's flags: which records it leaves out
// (Change.old_record_omitted, record_omitted: the change with them would
// not fit in one message), and whether it is the reaper's remove of an
// expired record (Change.expired).
type changeFlags struct{ old, rec, expired bool }

// changeSize returns the size of a change's WatchResponse field whose key
// holds keyLen bytes, as addChange writes it (TestWatchEncodeMatchesProto
// holds the two to the same sizes).
func changeSize(c uint64, index uint32, wt *watchType, keyLen, recLen, oldLen int, withRec, withOld bool, om changeFlags) (field, size int) {
	uf := len(wt.URLField)
	keyAny := wire.SizeAny(uf, keyLen)
	size = 2 + wire.SizeString(wire.ChangeType, wt.Name) + 1 + protowire.SizeVarint(uint64(keyAny)) + keyAny // op is never 0: 1-byte tag, 1-byte value
	if withRec {
		recAny := wire.SizeAny(uf, recLen)
		size += 1 + protowire.SizeVarint(uint64(recAny)) + recAny
	}
	if withOld {
		oldAny := wire.SizeAny(uf, oldLen)
		size += 1 + protowire.SizeVarint(uint64(oldAny)) + oldAny
	}
	size += 2 + wire.SizePosition(c, index, true) // at most 17: a 1-byte length
	if om.old {
		size += 2
	}
	if om.rec {
		size += 2
	}
	if om.expired {
		size += 2
	}
	return 1 + protowire.SizeVarint(uint64(size)) + size, size
}

// addChange appends one change. match is the record the key is cut from
// (the old one for a remove); rec is written when withRec, old when
// withOld. The type's name and URL fields are written from wt's encoded
// copies, lengths and the position with wire.AppendVarint: encoding a change
// field by field through protowire cost about as much as the rest of a
// tail watcher's work together.
func (r *respEnc) addChange(c uint64, index uint32, op changelog.Op, wt *watchType, match, rec, old []byte, withRec, withOld bool, om changeFlags) {
	r.key = appendKeyFields(r.key[:0], match, wt.KeyFields)
	if wt.typeField == nil {
		wt.encodeNames()
	}
	// The sizes as changeSize computes them, inline: this is the hot path.
	uf := len(wt.URLField)
	keyAny := wire.SizeAny(uf, len(r.key))
	size := 2 + len(wt.typeField) + 1 + protowire.SizeVarint(uint64(keyAny)) + keyAny // op is never 0: 1-byte tag, 1-byte value
	var recAny, oldAny int
	if withRec {
		recAny = wire.SizeAny(uf, len(rec))
		size += 1 + protowire.SizeVarint(uint64(recAny)) + recAny
	}
	if withOld {
		oldAny = wire.SizeAny(uf, len(old))
		size += 1 + protowire.SizeVarint(uint64(oldAny)) + oldAny
	}
	pos := wire.SizePosition(c, index, true) // at most 17: a 1-byte length
	size += 2 + pos
	if om.old {
		size += 2
	}
	if om.rec {
		size += 2
	}
	if om.expired {
		size += 2
	}
	field := 1 + protowire.SizeVarint(uint64(size)) + size

	r.reserve(field + wire.MaxPositionField)
	b := *r.bp
	b = append(b, tagWatchChanges)
	b = wire.AppendVarint(b, uint64(size))
	b = append(b, tagChangeOp, byte(op))
	b = append(b, wt.typeField...)
	b = wire.AppendAnyField(b, tagChangeKey, keyAny, wt.URLField, r.key)
	if withRec {
		b = wire.AppendAnyField(b, tagChangeRecord, recAny, wt.URLField, rec)
	}
	if withOld {
		b = wire.AppendAnyField(b, tagChangeOld, oldAny, wt.URLField, old)
	}
	b = append(b, tagChangePos, byte(pos))
	if c != 0 {
		b = append(b, tagPosCommit)
		b = wire.AppendVarint(b, c)
	}
	b = append(b, tagPosIndex)
	b = wire.AppendVarint(b, uint64(index))
	if om.old {
		b = append(b, tagChangeOldOmit, 1)
	}
	if om.rec {
		b = append(b, tagChangeRecOmit, 1)
	}
	if om.expired {
		b = append(b, tagChangeExpired, 1)
	}
	*r.bp = b
	r.n++
}

// len is the size of the response being built (0 when none is).
func (r *respEnc) len() int {
	if r.bp == nil {
		return 0
	}
	return len(*r.bp)
}

// One-byte tags of the fields addChange writes (field numbers under 16).
const (
	tagWatchChanges  = byte(wire.WatchResponseChanges)<<3 | byte(protowire.BytesType)
	tagChangeOp      = byte(wire.ChangeOp)<<3 | byte(protowire.VarintType)
	tagChangeKey     = byte(wire.ChangeKey)<<3 | byte(protowire.BytesType)
	tagChangeRecord  = byte(wire.ChangeRecord)<<3 | byte(protowire.BytesType)
	tagChangeOld     = byte(wire.ChangeOld)<<3 | byte(protowire.BytesType)
	tagChangePos     = byte(wire.ChangePosition)<<3 | byte(protowire.BytesType)
	tagPosCommit     = byte(wire.PositionCommit)<<3 | byte(protowire.VarintType)
	tagPosIndex      = byte(wire.PositionIndex)<<3 | byte(protowire.VarintType)
	tagChangeOldOmit = byte(wire.ChangeOldOmit)<<3 | byte(protowire.VarintType)
	tagChangeRecOmit = byte(wire.ChangeRecOmit)<<3 | byte(protowire.VarintType)
	tagChangeExpired = byte(wire.ChangeExpired)<<3 | byte(protowire.VarintType)
)

// encodeNames sets wt's encoded Change.type field (the type's Any.type_url
// field is the catalog's, WatchType.URLField).
func (wt *watchType) encodeNames() {
	wt.typeField = wire.AppendString(make([]byte, 0, wire.SizeString(wire.ChangeType, wt.Name)), wire.ChangeType, wt.Name)
}

// appendKeyFields is record.AppendFields(dst, rec, nums), with a scan of the
// common wire types that is several times faster; on anything else (a
// group, a malformed field) it leaves the record to AppendFields, so the
// result is always the same (FuzzWatchKey). A key of one field, the common
// case, goes to appendKeyField first.
func appendKeyFields(dst, rec []byte, nums []protowire.Number) []byte {
	if len(nums) == 1 {
		if out, ok := appendKeyField(dst, rec, nums[0]); ok {
			return out
		}
	}
	return scanKeyFields(dst, rec, nums)
}

// appendKeyField appends every occurrence of field num in rec, reading
// one-byte tags, one-byte lengths and varints of at most 9 bytes inline;
// ok is false (dst's bytes past its length changed, its length not) on
// anything else: the caller scans the record again the general way. It
// was about 40 ns a change as the general scan, a tenth of the server's
// work per watched change.
func appendKeyField(dst, rec []byte, num protowire.Number) (out []byte, ok bool) {
	at := len(dst)
	for i := 0; i < len(rec); {
		t := rec[i]
		if t >= 0x80 || t < 1<<3 {
			return dst[:at], false // a longer tag, or field 0
		}
		start := i
		i++
		switch protowire.Type(t & 7) {
		case protowire.VarintType:
			if len(rec)-i >= 8 {
				// The first byte of the eight without the
				// continuation bit ends the varint.
				m := ^binary.LittleEndian.Uint64(rec[i:]) & 0x8080808080808080
				if m == 0 {
					return dst[:at], false
				}
				i += bits.TrailingZeros64(m)>>3 + 1
				break
			}
			for {
				if i >= len(rec) {
					return dst[:at], false
				}
				i++
				if rec[i-1] < 0x80 {
					break
				}
			}
		case protowire.BytesType:
			if i >= len(rec) || rec[i] >= 0x80 {
				return dst[:at], false
			}
			i += 1 + int(rec[i])
		case protowire.Fixed64Type:
			i += 8
		case protowire.Fixed32Type:
			i += 4
		default:
			return dst[:at], false
		}
		if i > len(rec) {
			return dst[:at], false
		}
		if protowire.Number(t>>3) == num {
			dst = append(dst, rec[start:i]...)
		}
	}
	return dst, true
}

// scanKeyFields is appendKeyFields without the one-field path.
func scanKeyFields(dst, rec []byte, nums []protowire.Number) []byte {
	at := len(dst)
	for i := 0; i < len(rec); {
		start := i
		tag, n := uvarint(rec[i:])
		num := protowire.Number(tag >> 3)
		if n == 0 || num == 0 || tag>>3 > uint64(protowire.MaxValidNumber) {
			return record.AppendFields(dst[:at], rec, nums)
		}
		i += n
		switch protowire.Type(tag & 7) {
		case protowire.VarintType:
			// Skipped, not decoded: at most 10 bytes, the 10th
			// carrying only the top bit, as protowire accepts.
			j, end := i, min(len(rec), i+10)
			for j < end && rec[j] >= 0x80 {
				j++
			}
			if j < end && (j-i < 9 || rec[j] <= 1) {
				n = j - i + 1
			} else {
				n = 0
			}
		case protowire.BytesType:
			var l uint64
			l, n = uvarint(rec[i:])
			if n > 0 && l <= uint64(len(rec)-i-n) {
				n += int(l)
			} else {
				n = 0
			}
		case protowire.Fixed64Type:
			n = 8
		case protowire.Fixed32Type:
			n = 4
		default:
			n = 0
		}
		if n == 0 || n > len(rec)-i {
			return record.AppendFields(dst[:at], rec, nums)
		}
		i += n
		for _, want := range nums {
			if num == want {
				dst = append(dst, rec[start:i]...)
				break
			}
		}
	}
	return dst
}

// uvarint decodes a varint of at most 10 bytes that fits 64 bits; n is 0
// when b does not start with one.
func uvarint(b []byte) (v uint64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	if len(b) > 1 && b[1] < 0x80 {
		return uint64(b[0]&0x7f) | uint64(b[1])<<7, 2
	}
	v, n = protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, 0
	}
	return v, n
}

// take appends the progress and hands the response's buffer over: the
// encoder no longer holds it, and the next response starts in another.
func (r *respEnc) take(p position) *[]byte {
	r.finish(p)
	bp := r.bp
	r.bp, r.n = nil, 0
	return bp
}

// appendRaw appends one encoded change (its WatchResponse field 1).
func (r *respEnc) appendRaw(ch []byte) {
	r.reserve(len(ch) + wire.MaxPositionField)
	*r.bp = append(*r.bp, ch...)
	r.n++
}

// finish appends the progress and returns the response's bytes; addChange
// and appendRaw reserved room for it.
func (r *respEnc) finish(p position) []byte {
	*r.bp = wire.AppendPosition(*r.bp, wire.WatchResponseProgress, p.commit, p.index, p.part)
	r.last = len(*r.bp)
	return *r.bp
}

// release returns the buffer to the pool; the bytes finish returned are
// not used again.
func (r *respEnc) release() {
	if r.bp != nil {
		grpcbuf.Pool.Put(r.bp)
		r.bp, r.n = nil, 0
	}
}

// appendProgress appends a progress-only WatchResponse.
func appendProgress(b []byte, p position) []byte {
	return wire.AppendPosition(b, wire.WatchResponseProgress, p.commit, p.index, p.part)
}
