package engine

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/protobase/protobase/internal/grpcbuf"
	"github.com/protobase/protobase/internal/record"
)

// A watcher writes its WatchResponses as wire bytes, straight from the
// log entry's record bytes, into a buffer of grpcbuf.Pool: the server's
// codec passes them through as a grpcbuf.Frame. Building pb.Change and
// anypb.Any messages and marshalling them was a quarter of the server's
// CPU with ten watchers (issue 17). The bytes decode to the message the
// builder made (TestWatchEncodeMatchesProto); fields are written in
// field-number order, as proto.Marshal does.

// Field numbers of the messages encoded here.
const (
	fieldWatchChanges  = 1 // WatchResponse.changes
	fieldWatchProgress = 2 // WatchResponse.progress

	fieldChangeOp     = 1
	fieldChangeType   = 2
	fieldChangeKey    = 3
	fieldChangeRecord = 4
	fieldChangeOld    = 5
	fieldChangePos    = 6

	fieldPosCommit = 1
	fieldPosIndex  = 2

	fieldAnyURL   = 1
	fieldAnyValue = 2
)

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

// addChange appends one change. match is the record the key is cut from
// (the old one for a remove); rec is written when withRec, old when
// withOld.
func (r *respEnc) addChange(c uint64, index uint32, op byte, wt *watchType, match, rec, old []byte, withRec, withOld bool) {
	r.key = record.AppendFields(r.key[:0], match, wt.t.pkNums)
	url := wt.t.url
	size := 2 + sizeString(fieldChangeType, wt.name) // op is never 0: 1-byte tag, 1-byte value
	size += 1 + protowire.SizeBytes(sizeAny(url, len(r.key)))
	if withRec {
		size += 1 + protowire.SizeBytes(sizeAny(url, len(rec)))
	}
	if withOld {
		size += 1 + protowire.SizeBytes(sizeAny(url, len(old)))
	}
	size += 1 + protowire.SizeBytes(sizePos(c, index, true))

	r.reserve(1 + protowire.SizeBytes(size) + sizePosField)
	b := *r.bp
	b = protowire.AppendTag(b, fieldWatchChanges, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = protowire.AppendTag(b, fieldChangeOp, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(op))
	b = appendString(b, fieldChangeType, wt.name)
	b = appendAny(b, fieldChangeKey, url, r.key)
	if withRec {
		b = appendAny(b, fieldChangeRecord, url, rec)
	}
	if withOld {
		b = appendAny(b, fieldChangeOld, url, old)
	}
	b = appendPos(b, fieldChangePos, c, index, true)
	*r.bp = b
	r.n++
}

// finish appends the progress and returns the response's bytes.
// appendRaw appends one encoded change (its WatchResponse field 1).
func (r *respEnc) appendRaw(ch []byte) {
	r.reserve(len(ch) + sizePosField)
	*r.bp = append(*r.bp, ch...)
	r.n++
}

// finish appends the progress and returns the response's bytes; addChange
// and appendRaw reserved room for it.
func (r *respEnc) finish(p position) []byte {
	*r.bp = appendPos(*r.bp, fieldWatchProgress, p.commit, p.index, p.part)
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
	return appendPos(b, fieldWatchProgress, p.commit, p.index, p.part)
}

func sizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func sizeAny(url string, n int) int {
	size := sizeString(fieldAnyURL, url)
	if n > 0 {
		size += 1 + protowire.SizeBytes(n)
	}
	return size
}

// appendAny appends an Any of url holding v as field num (present even
// when empty, as a set message field is).
func appendAny(b []byte, num protowire.Number, url string, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(sizeAny(url, len(v))))
	b = appendString(b, fieldAnyURL, url)
	if len(v) > 0 {
		b = protowire.AppendTag(b, fieldAnyValue, protowire.BytesType)
		b = protowire.AppendBytes(b, v)
	}
	return b
}

// sizePosField bounds the size of a Position field: tag, length, and two
// fields of at most 1 + 10 bytes.
const sizePosField = 2 + 2*11

// sizePos is the size of a Position; index is present when part.
func sizePos(c uint64, index uint32, part bool) int {
	size := 0
	if c != 0 {
		size += 1 + protowire.SizeVarint(c)
	}
	if part {
		size += 1 + protowire.SizeVarint(uint64(index))
	}
	return size
}

func appendPos(b []byte, num protowire.Number, c uint64, index uint32, part bool) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(sizePos(c, index, part)))
	if c != 0 {
		b = protowire.AppendTag(b, fieldPosCommit, protowire.VarintType)
		b = protowire.AppendVarint(b, c)
	}
	if part {
		b = protowire.AppendTag(b, fieldPosIndex, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(index))
	}
	return b
}
