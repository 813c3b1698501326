package watch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/wire"
)

// encChange is one change as the watcher sees it.
type encChange struct {
	c        uint64
	index    uint32
	op       changelog.Op
	wt       *watchType
	rec, old []byte
	om       changeFlags // records left out (rare: changes over a message)
}

// refChange builds the change as messages, the way the watcher did before
// it encoded responses itself: the reference the encoder must match.
func refChange(ch encChange, withOld bool) *pb.Change {
	match := ch.rec
	if ch.op == changelog.Remove {
		match = ch.old
	}
	url := ch.wt.URL
	idx := ch.index
	out := &pb.Change{
		Op:       pb.ChangeOp(ch.op),
		Type:     ch.wt.Name,
		Key:      &anypb.Any{TypeUrl: url, Value: record.AppendFields(nil, match, ch.wt.KeyFields)},
		Position: &pb.Position{Commit: ch.c, Index: &idx},
	}
	if ch.op != changelog.Remove && !ch.om.rec {
		out.Record = &anypb.Any{TypeUrl: url, Value: ch.rec}
	}
	if withOld && ch.op != changelog.Insert && !ch.om.old {
		out.OldRecord = &anypb.Any{TypeUrl: url, Value: ch.old}
	}
	out.OldRecordOmitted, out.RecordOmitted, out.Expired = ch.om.old, ch.om.rec, ch.om.expired
	return out
}

func refProgress(p position) *pb.Position {
	pp := &pb.Position{Commit: p.commit}
	if p.part {
		i := p.index
		pp.Index = &i
	}
	return pp
}

// randRecord returns the bytes of a record of up to six fields, in any
// order, some repeated; empty now and then.
func randRecord(r *rand.Rand) []byte {
	var b []byte
	for range r.IntN(7) {
		num := protowire.Number(1 + r.IntN(6))
		if r.IntN(2) == 0 {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, r.Uint64()>>r.IntN(64))
		} else {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			v := make([]byte, r.IntN(40))
			for i := range v {
				v[i] = byte(r.IntN(256))
			}
			b = protowire.AppendBytes(b, v)
		}
	}
	return b
}

func testWatchTypes() []*watchType {
	mk := func(name string, pk ...protowire.Number) *watchType {
		url := "type.googleapis.com/" + name
		return &watchType{WatchType: engine.WatchType{Name: name, URL: url, URLField: wire.AppendString(nil, wire.AnyTypeURL, url), KeyFields: pk}}
	}
	return []*watchType{mk("shop.User", 1), mk("shop.Order", 2, 1), mk("a.B", 5), mk("x.NoKey")}
}

// randChanges returns n random changes of types, positions increasing.
func randChanges(r *rand.Rand, types []*watchType, n int) []encChange {
	out := make([]encChange, n)
	c := 1 + r.Uint64N(1<<40)
	var idx uint32
	for i := range out {
		if r.IntN(3) == 0 {
			c += 1 + r.Uint64N(1000)
			idx = 0
		}
		ch := encChange{c: c, index: idx, op: changelog.Op(1 + r.IntN(3)), wt: types[r.IntN(len(types))]}
		idx += 1 + uint32(r.IntN(300))
		if ch.op != changelog.Remove {
			ch.rec = randRecord(r)
		}
		if ch.op != changelog.Insert {
			ch.old = randRecord(r)
		}
		if r.IntN(10) == 0 {
			ch.om = changeFlags{old: ch.op != changelog.Insert, rec: ch.op != changelog.Remove && r.IntN(2) == 0}
		}
		ch.om.expired = ch.op == changelog.Remove && r.IntN(3) == 0
		out[i] = ch
	}
	return out
}

// encodeResponse encodes chs as one response with progress p, checking
// each change's size against changeSize.
func encodeResponse(e *respEnc, chs []encChange, withOld bool, p position) []byte {
	return encodeChanges(e, chs, withOld, p, true)
}

// encodeChanges encodes chs as one response with progress p, as the
// server does; with check, it also holds each change's size to changeSize
// (benchmarks leave that out: the server does not do it).
func encodeChanges(e *respEnc, chs []encChange, withOld bool, p position, check bool) []byte {
	e.start()
	for _, ch := range chs {
		match := ch.rec
		if ch.op == changelog.Remove {
			match = ch.old
		}
		om := ch.om
		om.old = om.old && withOld
		withRec, withOldRec := ch.op != changelog.Remove && !om.rec, withOld && ch.op != changelog.Insert && !om.old
		from := len(*e.bp)
		e.addChange(ch.c, ch.index, ch.op, ch.wt, match, ch.rec, ch.old, withRec, withOldRec, om)
		if !check {
			continue
		}
		if want, _ := changeSize(ch.c, ch.index, ch.wt, len(e.key), len(ch.rec), len(ch.old), withRec, withOldRec, om); len(*e.bp)-from != want {
			panic(fmt.Sprintf("addChange wrote %d bytes, changeSize says %d", len(*e.bp)-from, want))
		}
	}
	return e.finish(p)
}

// The hand-encoded response decodes to the message the builder made, and
// is the very bytes proto.Marshal writes for it: over random changes of
// every op and several types, with old records on and off, and batches
// of one change up to many.
func TestWatchEncodeMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	types := testWatchTypes()
	var e respEnc
	for iter := range 500 {
		withOld := iter%2 == 0
		chs := randChanges(r, types, 1+r.IntN(20))
		last := chs[len(chs)-1]
		p := position{commit: last.c, index: last.index, part: r.IntN(2) == 0}
		want := &pb.WatchResponse{Progress: refProgress(p)}
		for _, ch := range chs {
			ch.om.old = ch.om.old && withOld
			want.Changes = append(want.Changes, refChange(ch, withOld))
		}
		got := encodeResponse(&e, chs, withOld, p)
		dec := new(pb.WatchResponse)
		if err := proto.Unmarshal(got, dec); err != nil {
			t.Fatalf("iteration %d: encoded response does not decode: %v", iter, err)
		}
		if !proto.Equal(dec, want) {
			t.Fatalf("iteration %d: decoded\n%v\nwant\n%v", iter, dec, want)
		}
		wantB, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wantB) {
			t.Fatalf("iteration %d: bytes differ from proto.Marshal's\n got %x\nwant %x", iter, got, wantB)
		}
		e.release()
	}
}

// A progress-only response, including the zero position of an empty log.
func TestWatchEncodeProgress(t *testing.T) {
	for _, p := range []position{{}, {commit: 1}, {commit: 1 << 60, index: 0, part: true}, {commit: 9, index: 1<<32 - 1, part: true}} {
		got := appendProgress(nil, p)
		dec := new(pb.WatchResponse)
		if err := proto.Unmarshal(got, dec); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		if want := (&pb.WatchResponse{Progress: refProgress(p)}); !proto.Equal(dec, want) {
			t.Fatalf("%+v: decoded %v, want %v", p, dec, want)
		}
	}
}

// BenchmarkWatchEncode compares building a response of 100 changes as
// messages and marshalling it (the old path) with encoding it by hand.
func BenchmarkWatchEncode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	chs := randChanges(r, testWatchTypes(), 100)
	p := position{commit: chs[99].c}
	b.Run("messages", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := &pb.WatchResponse{Progress: refProgress(p)}
			for _, ch := range chs {
				m.Changes = append(m.Changes, refChange(ch, true))
			}
			if _, err := proto.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoded", func(b *testing.B) {
		b.ReportAllocs()
		var e respEnc
		for b.Loop() {
			encodeChanges(&e, chs, true, p, false)
			e.release()
		}
	})
	// The watch experiment's shape: a response of 1,000 inserts of
	// ~100-byte records of five fields, the key the first.
	b.Run("inserts", func(b *testing.B) {
		wt := testWatchTypes()[0]
		ins := make([]encChange, 1000)
		for i := range ins {
			ins[i] = encChange{c: 1 << 20, index: uint32(i), op: changelog.Insert, wt: wt, rec: itemRecord(int64(1<<40 + i))}
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(ins)))
		var e respEnc
		for b.Loop() {
			encodeChanges(&e, ins, false, position{commit: 1 << 20}, false)
			e.release()
		}
	})
}

// itemRecord is a record shaped like the lab's items: an id, a name, an
// email, a time and a sentence.
func itemRecord(id int64) []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "name-12345")
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, "user1099511627776@example.com")
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, 1700000000000+uint64(id))
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	return protowire.AppendString(b, "lorem ipsum dolor sit amet, consectetur adipiscing")
}

// Once its buffers have grown, encoding a response allocates nothing:
// the key is cut from the record into a reused scratch, the response is
// written into a pool buffer.
func TestWatchEncodeAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	chs := randChanges(r, testWatchTypes(), 50)
	p := position{commit: chs[49].c}
	var e respEnc
	encodeResponse(&e, chs, true, p)
	e.release()
	// A collection empties the pool the response buffers come from: none
	// runs while allocations are counted.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if n := testing.AllocsPerRun(100, func() {
		encodeResponse(&e, chs, true, p)
		e.release()
	}); n > 0 {
		t.Fatalf("%v allocations per response", n)
	}
}

// appendKeyFields cuts the same bytes as record.AppendFields from any
// input, well-formed or not: overlong and overflowing varints, lengths
// past the end, groups, field number 0.
func FuzzWatchKey(f *testing.F) {
	for _, seed := range [][]byte{
		nil,
		itemRecord(1 << 40),
		{0x08, 0x01, 0x12, 0x02, 'h', 'i', 0x08, 0x02},                     // the key field twice
		{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // 10-byte varint
		{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, // overflow
		{0x12, 0x05, 'a'},                    // length past the end
		{0x0b, 0x08, 0x01, 0x0c, 0x08, 0x07}, // a group
		{0x00, 0x01},                         // field 0
		{0x0d, 1, 2, 3, 4, 0x09, 1, 2, 3, 4, 5, 6, 7, 8, 0x08, 0x80, 0x01},
		{0x08, 0x80}, // truncated varint
		{0x08, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x09, 0x10, 0x01},    // 9-byte varint
		append([]byte{0x12, 0x80, 0x01}, make([]byte, 128)...),                      // 2-byte length
		{0x80, 0x01, 0x05, 0x08, 0x03},                                              // 2-byte tag (field 16)
		{0x08, 0x96, 0x01, 0x1a, 0x03, 'a', 'b', 'c', 0x08, 0x7f, 0x20, 0x90, 0x4e}, // short varints at the end
	} {
		f.Add(seed, uint8(1), uint8(2))
	}
	f.Fuzz(func(t *testing.T, rec []byte, a, b uint8) {
		nums := []protowire.Number{protowire.Number(a%20 + 1)}
		if b%3 != 0 {
			nums = append(nums, protowire.Number(b%20+1))
		}
		prefix := []byte("dst")
		got := appendKeyFields(append([]byte(nil), prefix...), rec, nums)
		want := record.AppendFields(append([]byte(nil), prefix...), rec, nums)
		if !bytes.Equal(got, want) {
			t.Fatalf("fields %v of %x: cut %x, AppendFields %x", nums, rec, got, want)
		}
		// The general scan, which the one-field path falls back to.
		if got := scanKeyFields(append([]byte(nil), prefix...), rec, nums); !bytes.Equal(got, want) {
			t.Fatalf("fields %v of %x: scanned %x, AppendFields %x", nums, rec, got, want)
		}
	})
}

// BenchmarkWatchKey compares cutting the key of a ~100-byte record of five
// fields (the watch experiment's) by the one-field path and by the
// general scan, in one invocation:
//
//	go test -run '^$' -bench WatchKey ./internal/watch/
func BenchmarkWatchKey(b *testing.B) {
	rec := itemRecord(1<<40 + 7)
	nums := []protowire.Number{1}
	var dst []byte
	b.Run("field", func(b *testing.B) {
		for b.Loop() {
			dst = appendKeyFields(dst[:0], rec, nums)
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			dst = scanKeyFields(dst[:0], rec, nums)
		}
	})
}
