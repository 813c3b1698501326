package client

import (
	"bytes"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/anywire"
)

// A WatchResponse carries up to 1,000 changes by default, and a watcher
// of a busy database receives hundreds of thousands a second. The
// generated decoder allocates about ten times per change (the Change, its
// type name, two or three Anys with their type URLs and copied values,
// the Position and its index): on the 2 cores the writer and the watcher
// share, that decoding is part of what a watcher costs the writer (issue
// 17). The readCodec decodes a WatchResponse as it does a ScanResponse:
// one copy of the response's bytes, every record's value pointing into
// it, the Changes with their Positions in one slab, the Anys in another,
// one string per distinct type name and type URL. A change kept by the
// caller keeps its whole response's bytes alive.
//
// Only the common shape is taken (known fields with their wire types,
// each message field of a Change at most once, Anys holding only type_url
// and value); anything else goes to proto.Unmarshal whole, so that the
// result and the error are always proto.Unmarshal's (FuzzDecodeWatch
// checks it).

// Wire numbers of WatchResponse, Change and Position.
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
)

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

// watchDecoder holds the slabs of one response being decoded and the
// strings its changes share.
type watchDecoder struct {
	anys     []anypb.Any // not yet used; refilled by n when exhausted
	n        int         // changes in the response
	lastType string      // the last type name, found valid UTF-8
	lastURL  string      // the last type URL, found valid UTF-8
}

// watchCodec is the codec of the Watch call: protobuf, with the decoder
// above for its responses. Its name is "proto", so the server sees
// ordinary protobuf.
type watchCodec struct{}

// watchCall makes a call use watchCodec.
var watchCall = grpc.ForceCodecV2(watchCodec{})

// Name implements encoding.CodecV2.
func (watchCodec) Name() string { return "proto" }

// Marshal implements encoding.CodecV2.
func (watchCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

// Unmarshal implements encoding.CodecV2.
func (watchCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*pb.WatchResponse); ok {
		return decodeWatchResponse(ownCopy(data), m)
	}
	return protoCodec.Unmarshal(data, v)
}

// decodeWatchResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy.
func decodeWatchResponse(b []byte, m *pb.WatchResponse) error {
	if !decodeWatchFast(b, m) {
		return proto.Unmarshal(b, m)
	}
	return nil
}

// decodeWatchFast decodes b into m when b has the common shape; false
// leaves m to be reset by proto.Unmarshal.
func decodeWatchFast(b []byte, m *pb.WatchResponse) bool {
	n, progress := 0, 0
	for rest := b; len(rest) > 0; {
		num, typ, l := protowire.ConsumeTag(rest)
		if l < 0 || typ != protowire.BytesType {
			return false
		}
		_, k := protowire.ConsumeBytes(rest[l:])
		if k < 0 {
			return false
		}
		rest = rest[l+k:]
		switch num {
		case fieldWatchChanges:
			n++
		case fieldWatchProgress:
			// Repeated, proto.Unmarshal merges them: rare, left to it.
			if progress++; progress > 1 {
				return false
			}
		default:
			return false
		}
	}
	d := watchDecoder{n: n}
	var slots []changeSlot
	var changes []*pb.Change
	if n > 0 {
		slots = make([]changeSlot, n)
		changes = make([]*pb.Change, n)
		d.anys = make([]anypb.Any, 2*n) // a key and a record each, mostly
	}
	var prog *posSlot
	i := 0
	for rest := b; len(rest) > 0; {
		num, _, l := protowire.ConsumeTag(rest)
		v, k := protowire.ConsumeBytes(rest[l:])
		rest = rest[l+k:]
		if num == fieldWatchProgress {
			prog = new(posSlot)
			if !decodePosition(v, prog) {
				return false
			}
			continue
		}
		s := &slots[i]
		if !d.change(v, s) {
			return false
		}
		changes[i] = &s.c
		i++
	}
	m.Reset()
	m.Changes = changes
	if prog != nil {
		m.Progress = &prog.p
	}
	return true
}

// change decodes one Change into s.
func (d *watchDecoder) change(b []byte, s *changeSlot) bool {
	c := &s.c
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return false
		}
		b = b[l:]
		if typ == protowire.VarintType {
			v, k := protowire.ConsumeVarint(b)
			if k < 0 || num != fieldChangeOp {
				return false
			}
			b = b[k:]
			c.Op = pb.ChangeOp(int32(v))
			continue
		}
		if typ != protowire.BytesType {
			return false
		}
		v, k := protowire.ConsumeBytes(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		switch num {
		case fieldChangeType:
			if string(v) != d.lastType {
				if !utf8.Valid(v) {
					return false
				}
				d.lastType = string(v)
			}
			c.Type = d.lastType
		case fieldChangeKey, fieldChangeRecord, fieldChangeOld:
			field := &c.Key
			switch num {
			case fieldChangeRecord:
				field = &c.Record
			case fieldChangeOld:
				field = &c.OldRecord
			}
			// Repeated, proto.Unmarshal merges them: left to it.
			if *field != nil {
				return false
			}
			a := d.any()
			if !anywire.Decode(v, a, &d.lastURL) {
				return false
			}
			*field = a
		case fieldChangePos:
			if c.Position != nil || !decodePosition(v, &s.pos) {
				return false
			}
			c.Position = &s.pos.p
		default:
			return false
		}
	}
	return true
}

// any returns the next unused Any of the slab, taking another when it is
// exhausted (a response of updates or removes with their old records).
func (d *watchDecoder) any() *anypb.Any {
	if len(d.anys) == 0 {
		d.anys = make([]anypb.Any, d.n)
	}
	a := &d.anys[0]
	d.anys = d.anys[1:]
	return a
}

// decodePosition decodes one Position into s.
func decodePosition(b []byte, s *posSlot) bool {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 || typ != protowire.VarintType {
			return false
		}
		v, k := protowire.ConsumeVarint(b[l:])
		if k < 0 {
			return false
		}
		b = b[l+k:]
		switch num {
		case fieldPosCommit:
			s.p.Commit = v
		case fieldPosIndex:
			s.index = uint32(v)
			s.p.Index = &s.index
		default:
			return false
		}
	}
	return true
}

// ownCopy returns the bytes of data in a new array that is not zeroed
// first (bytes.Join): a watch response is about 200 KB, every byte of
// which the copy writes anyway.
func ownCopy(data mem.BufferSlice) []byte {
	var arr [16][]byte
	parts := arr[:0]
	for _, buf := range data {
		parts = append(parts, buf.ReadOnlyData())
	}
	return bytes.Join(parts, nil)
}
