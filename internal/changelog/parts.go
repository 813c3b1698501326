package changelog

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// An entry stored in parts (see the package comment): its header under
// the commit's key, its changes' bytes under the part keys that follow it.
//
// Header value (versionParts):
//
//	version(1) | unix time ns (8 BE) | log bytes written before it (8 BE) |
//	changes' bytes (8 BE) | parts (4 BE)
//
// Part n holds the changes' bytes from n × PartBytes on; every part but
// the last holds PartBytes of them. A reader reads the parts as it reads
// the changes, holding at most one part and the change that straddles
// it, not the whole entry.

const (
	versionParts      = 2
	partsHeaderSize   = headerSize + 8 + 4
	maxKeptPartCarry  = 1 << 20
	partsChangesField = headerSize
)

// putParts adds the builder's entry (its header filled) to wb in parts,
// as the header under its commit's key and its changes' bytes under the
// part keys.
func (b *Builder) putParts(wb store.WriteBatch, seq uint64) {
	body := b.buf[headerSize:]
	parts := (len(body) + PartBytes - 1) / PartBytes
	var h [partsHeaderSize]byte
	h[0] = versionParts
	copy(h[1:headerSize], b.buf[1:headerSize])
	binary.BigEndian.PutUint64(h[partsChangesField:], uint64(len(body)))
	binary.BigEndian.PutUint32(h[partsChangesField+8:], uint32(parts))
	wb.Set(b.key, h[:])
	var k [keyspace.LogPartKeyLen]byte
	for n := range parts {
		part := body[n*PartBytes : min(len(body), (n+1)*PartBytes)]
		wb.Set(keyspace.AppendLogPartKey(k[:0], seq, uint32(n)), part)
	}
	b.stored = uint64(len(b.key) + len(h) + parts*keyspace.LogPartKeyLen + len(body))
}

// entryHead is what the value under a commit's key says of its entry.
type entryHead struct {
	at     int64  // unix ns of the commit, on the log's clock
	cum    uint64 // log bytes written before the entry
	parts  uint32 // parts after the key (0: the value holds the entry)
	body   uint64 // the changes' bytes
	stored uint64 // bytes of the entry's keys and values
}

// readHead reads the value v under the commit key k.
func readHead(k, v []byte) (entryHead, error) {
	if len(v) < headerSize {
		return entryHead{}, errMalformed
	}
	h := entryHead{
		at:  int64(binary.BigEndian.Uint64(v[1:9])),
		cum: binary.BigEndian.Uint64(v[9:17]),
	}
	switch v[0] {
	case version:
		h.body = uint64(len(v) - headerSize)
		h.stored = uint64(len(k) + len(v))
	case versionParts:
		if len(v) != partsHeaderSize {
			return entryHead{}, errMalformed
		}
		h.body = binary.BigEndian.Uint64(v[partsChangesField:])
		h.parts = binary.BigEndian.Uint32(v[partsChangesField+8:])
		if h.parts == 0 || h.body > uint64(h.parts)*PartBytes || h.body <= uint64(h.parts-1)*PartBytes {
			return entryHead{}, errMalformed
		}
		h.stored = uint64(len(k)+len(v)) + uint64(h.parts)*uint64(keyspace.LogPartKeyLen) + h.body
	default:
		return entryHead{}, errMalformed
	}
	return h, nil
}

// entryCommit returns the commit of a log key, a commit's or a part's.
func entryCommit(k []byte) (c uint64, part bool, ok bool) {
	if c, ok := keyspace.LogCommit(k); ok {
		return c, false, true
	}
	c, _, ok = keyspace.LogPart(k)
	return c, true, ok
}

// parts is the reading of an entry's parts from a log iterator,
// positioned on the commit's key or the part last read.
type parts struct {
	it     store.Iterator
	commit uint64
	next   uint32 // the next part to read
	n      uint32 // parts in all
	left   uint64 // the changes' bytes in parts not yet read
	body   uint64 // the changes' bytes in all
	// carry holds the change that straddles parts: what was left of one
	// part and the next part after it.
	carry   []byte
	inCarry bool // the entry's unread bytes are in carry
	// reserve, when set, is called with a change's size before the carry
	// grows past maxKeptPartCarry to hold it, once per change: a watcher
	// covers the carry in its result budget, which a change of tens of
	// MiB would otherwise take outside it, once per watcher.
	reserve  func(n int) error
	reserved bool // reserve was called for the change being carried
}

// readEntry starts reading the entry of commit c under the iterator's
// key. An entry stored in parts reads them through p, which the caller
// keeps for its reads (reusing its carry): the iterator then moves over
// the entry's parts as its changes are read (see done).
func readEntry(it store.Iterator, c uint64, p *parts) (Entry, error) {
	v := it.Value()
	if len(v) == 0 || v[0] != versionParts {
		return parseEntry(v)
	}
	h, err := readHead(it.Key(), v)
	if err != nil {
		return Entry{}, err
	}
	*p = parts{it: it, commit: c, n: h.parts, left: h.body, body: h.body, carry: p.carry[:0], reserve: p.reserve}
	return Entry{at: h.at, cum: h.cum, size: int(min(h.body, 1<<62)), parts: p}, nil
}

// more reports whether parts are left to read.
func (p *parts) more() bool { return p != nil && p.next < p.n }

// step moves the iterator to the next part and returns its bytes, valid
// until the iterator next moves.
func (p *parts) step() ([]byte, error) {
	if !p.it.Next() {
		if err := p.it.Error(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: part %d of %d is missing", errMalformed, p.next, p.n)
	}
	c, n, ok := keyspace.LogPart(p.it.Key())
	if !ok || c != p.commit || n != p.next {
		return nil, fmt.Errorf("%w: part %d of %d is missing", errMalformed, p.next, p.n)
	}
	v := p.it.Value()
	want := min(p.left, PartBytes)
	if uint64(len(v)) != want {
		return nil, fmt.Errorf("%w: part %d holds %d bytes, not %d", errMalformed, n, len(v), want)
	}
	p.next++
	p.left -= want
	return v, nil
}

// refill makes le.rest the entry's unread bytes followed by the next
// part's: le.rest may be the current part's bytes, which the iterator's
// move invalidates, so they are copied first.
func (le *Entry) refill() error {
	p := le.parts
	if len(le.rest) == 0 {
		v, err := p.step()
		if err != nil {
			return err
		}
		le.rest, p.inCarry = v, false
		return nil
	}
	if !p.inCarry || len(le.rest) != len(p.carry) {
		// The bytes left move to the carry's start (they may be its
		// own tail: append copies as memmove does). A carry grown for
		// a large change is let go of.
		if cap(p.carry) > maxKeptPartCarry {
			p.carry = make([]byte, 0, len(le.rest)+PartBytes)
		}
		p.carry = append(p.carry[:0], le.rest...)
		le.rest, p.inCarry = p.carry, true
	}
	if p.reserve != nil && !p.reserved && len(p.carry)+PartBytes > maxKeptPartCarry {
		n, err := p.changeSize(p.carry)
		if err != nil {
			return err
		}
		if err := p.reserve(n); err != nil {
			return err
		}
		p.reserved = true
	}
	v, err := p.step()
	if err != nil {
		return err
	}
	p.carry = append(p.carry, v...)
	le.rest = p.carry
	return nil
}

// atPart reports whether the iterator is on part n of the entry.
func (p *parts) atPart(n uint32) bool {
	c, got, ok := keyspace.LogPart(p.it.Key())
	return ok && c == p.commit && got == n
}

// Shrink lets go of a carry grown for a large change once the change has
// been read (its bytes copied): what is left of the part at hand moves to
// a buffer of its own. A reader of an entry read across parts calls it
// after each change.
func (le *Entry) Shrink() {
	p := le.parts
	if p == nil || !p.inCarry || cap(p.carry) <= maxKeptPartCarry {
		return
	}
	p.carry = append(make([]byte, 0, len(le.rest)+PartBytes), le.rest...)
	le.rest = p.carry
}

// changeSize returns the size of the change that starts b, the carry: its
// record's length is in b, its old record's after the record, in a part
// further on, which it reads (the iterator then comes back to the part it
// was on).
func (p *parts) changeSize(b []byte) (int, error) {
	_, n := protowire.ConsumeVarint(b[min(1, len(b)):])
	if n < 0 {
		return 0, errMalformed
	}
	rec, m := protowire.ConsumeVarint(b[1+n:])
	if m < 0 || rec > p.body {
		return 0, errMalformed
	}
	head := uint64(1 + n + m)
	at := p.body - p.left - uint64(len(b)) + head + rec // of the old record's length in the changes
	if at >= p.body {
		return 0, errMalformed
	}
	var k [keyspace.LogPartKeyLen]byte
	part := uint32(at / PartBytes)
	var v []byte
	if p.it.SeekGE(keyspace.AppendLogPartKey(k[:0], p.commit, part)) && p.atPart(part) {
		if val, off := p.it.Value(), int(at%PartBytes); off < len(val) {
			v = append(v, val[off:min(len(val), off+binary.MaxVarintLen64)]...)
		}
		if len(v) < binary.MaxVarintLen64 && part+1 < p.n && p.it.Next() && p.atPart(part+1) {
			val := p.it.Value()
			v = append(v, val[:min(len(val), binary.MaxVarintLen64)]...)
		}
	}
	if !p.it.SeekGE(keyspace.AppendLogPartKey(k[:0], p.commit, p.next-1)) {
		if err := p.it.Error(); err != nil {
			return 0, err
		}
		return 0, errMalformed
	}
	old, o := protowire.ConsumeVarint(v)
	if o < 0 || old > p.body {
		return 0, errMalformed
	}
	return int(head + rec + uint64(o) + old), nil
}

// done leaves the iterator on the last key of the entry p reads (nil: an
// entry in one value), whatever its changes read of it, so that the next
// step of the iterator reaches the next commit; and lets go of a carry
// that held a large change.
func (p *parts) done() error {
	if p == nil {
		return nil
	}
	if cap(p.carry) > maxKeptPartCarry {
		p.carry = nil
	}
	if !p.more() {
		return nil
	}
	p.next = p.n
	if !p.it.SeekLT(keyspace.AppendLogKey(nil, p.commit+1)) {
		if err := p.it.Error(); err != nil {
			return err
		}
		return errMalformed
	}
	return nil
}
