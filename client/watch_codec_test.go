package client

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/wire"
)

// watchSeeds are responses of every shape the fast decoder takes, and
// some it must hand to proto.Unmarshal.
func watchSeeds(t testing.TB) [][]byte {
	t.Helper()
	idx := func(i uint32) *uint32 { return &i }
	url := "type.googleapis.com/shop.User"
	key := &anypb.Any{TypeUrl: url, Value: []byte{8, 1}}
	rec := &anypb.Any{TypeUrl: url, Value: []byte{8, 1, 18, 3, 'a', 'b', 'c'}}
	old := &anypb.Any{TypeUrl: url, Value: []byte{8, 1, 18, 1, 'x'}}
	msgs := []*pb.WatchResponse{
		{},
		{Progress: &pb.Position{Commit: 7}},
		{Progress: &pb.Position{}},
		{Changes: []*pb.Change{
			{Op: pb.ChangeOp_CHANGE_OP_INSERT, Type: "shop.User", Key: key, Record: rec, Position: &pb.Position{Commit: 9, Index: idx(0)}},
			{Op: pb.ChangeOp_CHANGE_OP_UPDATE, Type: "shop.User", Key: key, Record: rec, OldRecord: old, Position: &pb.Position{Commit: 9, Index: idx(1)}},
			{Op: pb.ChangeOp_CHANGE_OP_REMOVE, Type: "shop.User", Key: key, OldRecord: old, Position: &pb.Position{Commit: 10, Index: idx(0)}},
			{Op: pb.ChangeOp_CHANGE_OP_REMOVE, Type: "shop.User", Key: key, OldRecord: old, Position: &pb.Position{Commit: 10, Index: idx(1)}, Expired: true},
			{Op: pb.ChangeOp_CHANGE_OP_INSERT, Type: "shop.Order", Key: &anypb.Any{TypeUrl: "t/shop.Order"}, Record: &anypb.Any{}, Position: &pb.Position{Commit: 11, Index: idx(300)}},
			{Op: pb.ChangeOp_CHANGE_OP_UPDATE, Type: "shop.User", Key: key, Record: rec, OldRecordOmitted: true, Position: &pb.Position{Commit: 12, Index: idx(0)}},
			{Op: pb.ChangeOp_CHANGE_OP_UPDATE, Type: "shop.User", Key: key, OldRecordOmitted: true, RecordOmitted: true, Position: &pb.Position{Commit: 12, Index: idx(1)}},
		}, Progress: &pb.Position{Commit: 12, Index: idx(4)}},
		{Changes: []*pb.Change{{}, {Op: 77, Position: &pb.Position{}}}},
		{Changes: []*pb.Change{{Type: "é", Key: &anypb.Any{Value: []byte{1}}}}},
	}
	out := marshalAll(t, msgs)
	anyOf := func(u string, v []byte) []byte {
		return field(field(nil, 1, []byte(u)), 2, v)
	}
	pos := varint(varint(nil, wire.PositionCommit, 3), wire.PositionIndex, 1)
	// Changes of unusual shapes: a key given twice (merged), a position
	// given twice, an unknown field, op as bytes, a type of invalid
	// UTF-8, a type URL of invalid UTF-8, an Any with an unknown field, a
	// position with an unknown field, an op that overflows int32, the
	// index beyond uint32, a type URL given twice, a truncated field.
	changes := [][]byte{
		field(field(nil, wire.ChangeKey, anyOf("a", []byte{1})), wire.ChangeKey, field(nil, 2, []byte{2})),
		field(field(nil, wire.ChangePosition, pos), wire.ChangePosition, varint(nil, wire.PositionIndex, 5)),
		varint(nil, 9, 1),
		field(nil, wire.ChangeOp, []byte{1}),
		field(nil, wire.ChangeType, []byte{0xff}),
		field(nil, wire.ChangeRecord, anyOf("\xc0", nil)),
		field(nil, wire.ChangeRecord, varint(anyOf("a", nil), 3, 1)),
		field(nil, wire.ChangePosition, varint(nil, 3, 1)),
		varint(nil, wire.ChangeOp, 1<<40|2),
		varint(varint(nil, wire.ChangeOldOmit, 7), wire.ChangeRecOmit, 0), // a bool other than 1, a false one written
		field(nil, wire.ChangePosition, varint(nil, wire.PositionIndex, 1<<33|5)),
		field(nil, wire.ChangeKey, field(anyOf("a", []byte{1}), 1, []byte("b"))),
		protowire.AppendVarint(protowire.AppendTag(nil, wire.ChangeType, protowire.BytesType), 30),
	}
	for _, c := range changes {
		out = append(out, field(field(nil, wire.WatchResponseChanges, c), wire.WatchResponseProgress, pos))
	}
	// Responses of unusual shapes: progress twice, an unknown field,
	// changes as a varint, truncated.
	out = append(out,
		field(field(nil, wire.WatchResponseProgress, pos), wire.WatchResponseProgress, varint(nil, wire.PositionCommit, 4)),
		varint(nil, 5, 1),
		varint(nil, wire.WatchResponseChanges, 1),
		protowire.AppendVarint(protowire.AppendTag(nil, wire.WatchResponseChanges, protowire.BytesType), 9),
	)
	return out
}

// checkDecodeWatch decodes b with callCodec and with proto.Unmarshal and
// wants the same message and the same error.
func checkDecodeWatch(t *testing.T, b []byte) {
	t.Helper()
	want, got := new(pb.WatchResponse), new(pb.WatchResponse)
	wantErr := proto.Unmarshal(b, want)
	// Cut in two, as the transport may hand it over, and scribbled over
	// afterwards (the transport frees its buffers once the codec returns),
	// so that a record still pointing into it shows.
	in := append([]byte(nil), b...)
	half := len(in) / 2
	gotErr := callCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(in[:half]), mem.SliceBuffer(in[half:])}, got)
	for i := range in {
		in[i] = 0xaa
	}
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%x: error %v, proto.Unmarshal's %v", b, gotErr, wantErr)
	}
	if wantErr == nil && !proto.Equal(want, got) {
		t.Fatalf("%x:\n got %v\nwant %v", b, got, want)
	}
	// Decoded over the storage of a larger response, as a Watcher whose
	// caller takes batches does, from the transport's buffers cut in
	// pieces of every few sizes (fields crossing them are copied).
	for _, piece := range []int{1, 2, 3, 7, 64} {
		r := &watchRecv{reuse: true}
		if err := r.decode(mem.BufferSlice{mem.SliceBuffer(reuseBase)}); err != nil {
			t.Fatal(err)
		}
		in = append(in[:0], b...)
		var data mem.BufferSlice
		for rest := in; len(rest) > 0; {
			n := min(piece, len(rest))
			data, rest = append(data, mem.SliceBuffer(rest[:n])), rest[n:]
		}
		gotErr = r.decode(data)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%x, reused, pieces of %d: error %v, proto.Unmarshal's %v", b, piece, gotErr, wantErr)
		}
		if wantErr == nil && !proto.Equal(want, &r.resp) {
			t.Fatalf("%x, reused, pieces of %d:\n got %v\nwant %v", b, piece, &r.resp, want)
		}
	}
}

// reuseBase is a response of changes with every field set, decoded first
// into the storage that checkDecodeWatch decodes over.
var reuseBase = func() []byte {
	idx := uint32(3)
	a := &anypb.Any{TypeUrl: "t/x", Value: []byte{8, 9}}
	ch := &pb.Change{Op: 2, Type: "x", Key: a, Record: a, OldRecord: a, Position: &pb.Position{Commit: 8, Index: &idx}}
	b, err := proto.Marshal(&pb.WatchResponse{Changes: []*pb.Change{ch, ch, ch, ch}, Progress: &pb.Position{Commit: 9, Index: &idx}})
	if err != nil {
		panic(err)
	}
	return b
}()

// A Watcher sizes its slabs by the response before: a larger response
// (more changes, more Anys: old records too) takes new slabs as they run
// out, a change decoded before keeping its own, and a response with Next
// (new slabs) or NextBatch (reused) decodes as proto.Unmarshal does
// whatever came before it.
func TestDecodeWatchOutgrowsSlabs(t *testing.T) {
	big := bigWatchResponse(t, 1000)
	var withOld pb.WatchResponse
	if err := proto.Unmarshal(big, &withOld); err != nil {
		t.Fatal(err)
	}
	for _, c := range withOld.Changes {
		c.Op, c.OldRecord = pb.ChangeOp_CHANGE_OP_UPDATE, c.Record
	}
	bigOld, err := proto.Marshal(&withOld)
	if err != nil {
		t.Fatal(err)
	}
	for _, reuse := range []bool{true, false} {
		r := &watchRecv{reuse: reuse}
		for i, b := range [][]byte{bigWatchResponse(t, 3), big, bigOld, bigWatchResponse(t, 2), bigOld} {
			want := new(pb.WatchResponse)
			if err := proto.Unmarshal(b, want); err != nil {
				t.Fatal(err)
			}
			r.reuse = reuse
			if err := r.decode(mem.BufferSlice{mem.SliceBuffer(b)}); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(want, &r.resp) {
				t.Fatalf("reuse %v, response %d: got %d changes, not proto.Unmarshal's %d", reuse, i, len(r.resp.Changes), len(want.Changes))
			}
		}
	}
}

func TestDecodeWatchMatchesProto(t *testing.T) {
	for _, b := range watchSeeds(t) {
		checkDecodeWatch(t, b)
	}
}

func FuzzDecodeWatch(f *testing.F) {
	for _, b := range watchSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeWatch(t, b) })
}

// bigWatchResponse is a response of n inserts of one type, as a watcher
// at the tail of steady ingest receives.
func bigWatchResponse(t testing.TB, n int) []byte {
	t.Helper()
	m := &pb.WatchResponse{Progress: &pb.Position{Commit: 5}}
	for i := range n {
		ix := uint32(i)
		m.Changes = append(m.Changes, &pb.Change{
			Op: pb.ChangeOp_CHANGE_OP_INSERT, Type: "bench.Item",
			Key:      &anypb.Any{TypeUrl: "type.googleapis.com/bench.Item", Value: []byte{8, byte(i)}},
			Record:   &anypb.Any{TypeUrl: "type.googleapis.com/bench.Item", Value: make([]byte, 100)},
			Position: &pb.Position{Commit: 5, Index: &ix},
		})
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeWatchSlabs checks that a response's changes do not share
// storage (appending to one record's value, or changing one position,
// leaves the others as they were) and that a response of 1,000 changes
// costs a handful of allocations, not some per change.
func TestDecodeWatchSlabs(t *testing.T) {
	b := bigWatchResponse(t, 1000)
	var m pb.WatchResponse
	if err := (callCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Changes) != 1000 {
		t.Fatalf("%d changes", len(m.Changes))
	}
	c0, c1 := m.Changes[0], m.Changes[1]
	_ = append(c0.Key.Value, 'X')
	*c0.Position.Index = 99
	if c1.Key.Value[0] != 8 || c1.Key.Value[1] != 1 || c1.GetPosition().GetIndex() != 1 {
		t.Fatalf("changing change 0 changed change 1: %v", c1)
	}
	allocs := testing.AllocsPerRun(20, func() {
		var m pb.WatchResponse
		if err := (callCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &m); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 12 {
		t.Fatalf("decoding a response of 1,000 changes made %.0f allocations", allocs)
	}
}

// BenchmarkDecodeWatch compares the generated decoder with callCodec on
// a response of 1,000 inserts, into new slabs (Next) and into the slabs
// of the response before (NextBatch):
//
//	go test -run '^$' -bench DecodeWatch -benchmem ./client/
func BenchmarkDecodeWatch(b *testing.B) {
	resp := bigWatchResponse(b, 1000)
	data := mem.BufferSlice{mem.SliceBuffer(resp)}
	b.Run("proto", func(b *testing.B) {
		b.SetBytes(int64(len(resp)))
		for b.Loop() {
			var m pb.WatchResponse
			if err := protoCodec.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reused", func(b *testing.B) {
		b.SetBytes(int64(len(resp)))
		var r watchRecv
		for b.Loop() {
			r.reuse = true
			if err := r.decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("slab", func(b *testing.B) {
		b.SetBytes(int64(len(resp)))
		for b.Loop() {
			var m pb.WatchResponse
			if err := (callCodec{}).Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// countingPool is a mem.BufferPool that counts the buffers put back.
type countingPool struct{ puts int }

func (p *countingPool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (p *countingPool) Put(*[]byte)       { p.puts++ }

// A response decoded over reused slabs points into the transport's
// buffers: they go back to their pool when the next response is decoded
// over them, and never while the caller may keep its changes (they were
// lent by Next: reuse is off), so that a kept change is never written
// over by a later message.
func TestDecodeWatchHoldsBuffers(t *testing.T) {
	resp := bigWatchResponse(t, 100) // buffers over grpc's pooling threshold
	for _, c := range []struct {
		reuse bool
		puts  int
	}{{true, 2}, {false, 0}} {
		pool := new(countingPool)
		data := mem.BufferSlice{}
		for rest := resp; len(rest) > 0; {
			n := min(len(rest), len(resp)/2+1)
			bp := pool.Get(n)
			copy(*bp, rest[:n])
			data, rest = append(data, mem.NewBuffer(bp, pool)), rest[n:]
		}
		r := &watchRecv{reuse: true}
		if err := r.decode(data); err != nil {
			t.Fatal(err)
		}
		data.Free() // as the transport does once Unmarshal returns
		if pool.puts != 0 {
			t.Fatalf("%d buffers put back while the response points into them", pool.puts)
		}
		r.reuse = c.reuse
		if err := r.decode(mem.BufferSlice{mem.SliceBuffer(resp)}); err != nil {
			t.Fatal(err)
		}
		if pool.puts != c.puts {
			t.Fatalf("reuse %v: %d buffers put back, want %d", c.reuse, pool.puts, c.puts)
		}
	}
}
