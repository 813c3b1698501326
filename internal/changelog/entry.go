package changelog

import (
	"encoding/binary"
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

const (
	version    = 1
	headerSize = 1 + 8 + 8
)

// PartBytes bounds every value the log stores; see the package comment.
const PartBytes = 256 << 10

// Op is what a change did to its key; its values are the API's ChangeOp
// numbers.
type Op byte

// The change ops of the log.
const (
	Insert Op = 1
	Update Op = 2
	Remove Op = 3
	// Expire is a remove by the reaper: the record had expired. The API
	// shows it as a remove marked expired.
	Expire Op = 4
)

// errMalformed reports an entry this version cannot read.
var errMalformed = errors.New("change log entry is malformed")

// Builder builds the entry of one write batch. A writer keeps one and
// reuses its buffers from batch to batch: Begin, Add per change, then the
// Log's Put and Applied. Not safe for concurrent use.
type Builder struct {
	buf []byte // the entry: its header, then its changes
	key []byte // the commit's key, for Put
	// stored is what the entry adds to the log's keys and values, once
	// Put has added it.
	stored uint64
}

// maxKeptBuf is the largest entry buffer a Builder keeps for its next
// batch (Forget), and the tail for writers to reuse; larger batches
// allocate their own.
const maxKeptBuf = 1 << 20

// Begin starts the entry of a batch of changes whose new records total
// recBytes, with room for them and their changes' framing at once. Grown
// by append, an entry larger than the buffer kept between batches
// (maxKeptBuf) was copied and cleared once per doubling: 4.8 % of the
// process's CPU in a profile of 10,000-record batches, 0.9 % sized at
// once. The old records of updates and removes are not known yet; they
// grow it once more at most.
func (b *Builder) Begin(changes, recBytes int) {
	n := headerSize + recBytes + changes*changeFraming
	if cap(b.buf) < n {
		b.buf = make([]byte, 0, n)
	}
	b.buf = appendHeader(b.buf[:0])
}

// changeFraming bounds a change's bytes besides its records: the op, the
// type id's varint and two length varints of up to 3 bytes (records under
// 2 MiB; longer ones only make the estimate short).
const changeFraming = 1 + 5 + 3 + 3

// Add appends one change: op on a record of type typeID, rec the record
// after it (nil for a remove), old the one before (nil for an insert).
func (b *Builder) Add(op Op, typeID uint32, rec, old []byte) {
	b.buf = appendChange(b.buf, op, typeID, rec, old)
}

// Stored returns what the entry Put last added holds of the log's keys
// and values.
func (b *Builder) Stored() int64 { return int64(b.stored) }

// Forget lets go of a buffer too large to keep for the next batch: it is
// a copy of the batch's records, kept outside the writer's in-flight
// budget.
func (b *Builder) Forget() {
	if cap(b.buf) > maxKeptBuf {
		b.buf = nil
	}
}

// appendHeader starts an entry; Put fills time and size later.
func appendHeader(dst []byte) []byte {
	var h [headerSize]byte
	h[0] = version
	return append(dst, h[:]...)
}

func appendChange(dst []byte, op Op, typeID uint32, rec, old []byte) []byte {
	dst = append(dst, byte(op))
	dst = protowire.AppendVarint(dst, uint64(typeID))
	dst = protowire.AppendBytes(dst, rec)
	return protowire.AppendBytes(dst, old)
}

// Entry reads the changes of one entry, in order.
type Entry struct {
	at    int64  // unix ns of the commit
	cum   uint64 // log bytes written before the entry
	size  int    // the changes' bytes
	rest  []byte // the changes' bytes not yet read (of those at hand)
	index uint32 // of the next change
	// parts reads the rest of an entry stored in parts (parts.go); nil
	// when rest holds all of it.
	parts *parts
}

// parseEntry reads an entry held in one value (version 1), as stored or
// as the writer built it.
func parseEntry(v []byte) (Entry, error) {
	if len(v) < headerSize || v[0] != version {
		return Entry{}, errMalformed
	}
	return Entry{
		at:   int64(binary.BigEndian.Uint64(v[1:9])),
		cum:  binary.BigEndian.Uint64(v[9:17]),
		size: len(v) - headerSize,
		rest: v[headerSize:],
	}, nil
}

// Time returns the entry's time on the log's clock (unix ns).
func (le *Entry) Time() int64 { return le.at }

// Size returns the bytes of the entry's changes.
func (le *Entry) Size() int { return le.size }

// Parted reports whether the entry is read across parts.
func (le *Entry) Parted() bool { return le.parts != nil }

// Change is one change of an entry; its slices alias the entry's bytes,
// valid until the next change is read.
type Change struct {
	Op       Op
	TypeID   uint32
	Rec, Old []byte
	// Index is the change's place among the changes of its entry.
	Index uint32
}

// Next reads the next change into c; ok is false at the end. Filling the
// caller's change, not returning one, saves copying it. A change whose
// type id and lengths are each one byte (records under 128 bytes) is read
// here, without a call: reading every change through protowire was a
// fifth of the engine's work per watched change. Anything else goes to
// nextSlow, which reads every change the same (FuzzLogEntry).
func (le *Entry) Next(c *Change) (ok bool, err error) {
	b := le.rest
	if len(b) >= 4 && b[1] < 0x80 && b[2] < 0x80 && b[0]-byte(Insert) <= byte(Expire-Insert) {
		r := 3 + int(b[2])
		if r < len(b) && b[r] < 0x80 {
			if end := r + 1 + int(b[r]); end <= len(b) {
				*c = Change{Op: Op(b[0]), TypeID: uint32(b[1]), Rec: b[3:r], Old: b[r+1 : end], Index: le.index}
				le.rest = b[end:]
				le.index++
				return true, nil
			}
		}
	}
	return le.nextSlow(c)
}

// nextSlow is Next for any change, through protowire. A change that
// does not end in the bytes at hand continues in the entry's next part.
func (le *Entry) nextSlow(c *Change) (ok bool, err error) {
	for {
		if ok, err = le.read(c); err == nil || !le.parts.more() {
			if le.parts != nil {
				le.parts.reserved = false
			}
			return ok, err
		}
		if err := le.refill(); err != nil {
			return false, err
		}
	}
}

// read reads the next change from the bytes at hand; errMalformed when
// they do not hold a whole one (or are malformed), without consuming
// them.
func (le *Entry) read(c *Change) (ok bool, err error) {
	if len(le.rest) == 0 {
		if le.parts.more() {
			return false, errMalformed
		}
		return false, nil
	}
	b := le.rest
	c.Op, b = Op(b[0]), b[1:]
	id, n := protowire.ConsumeVarint(b)
	if n < 0 || id > 1<<32-1 || c.Op < Insert || c.Op > Expire {
		return false, errMalformed
	}
	c.TypeID, b = uint32(id), b[n:]
	if c.Rec, n = protowire.ConsumeBytes(b); n < 0 {
		return false, errMalformed
	}
	b = b[n:]
	if c.Old, n = protowire.ConsumeBytes(b); n < 0 {
		return false, errMalformed
	}
	le.rest = b[n:]
	c.Index = le.index
	le.index++
	return true, nil
}
