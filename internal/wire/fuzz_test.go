package wire

import (
	"bytes"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Every hand decoder against proto.Unmarshal on malformed input of every
// kind: each message of TestDecodersFieldByField cut short everywhere, and
// with each byte changed to make a varint run on, a length too long, a
// wire type wrong or a string invalid UTF-8; and fields that are malformed
// in themselves.
func TestDecodersMalformed(t *testing.T) {
	bad := [][]byte{
		bytes.Repeat([]byte{0xff}, 11),                                     // a varint of more than 10 bytes
		{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, // a varint over 64 bits
		{0x08},                               // a varint missing
		{0x0a, 0x7f},                         // a length past the end
		{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, // a length past any end
		{0x00, 0x00},                         // field 0
		{0x0b, 0x0c},                         // a group
		{0x0d, 0, 0, 0, 0},                   // field 1 as fixed32
		{0x11, 0, 0, 0, 0, 0, 0, 0, 0},       // field 2 as fixed64
		{0x0a, 0x02, 0xc3, 0x28},             // field 1 holding invalid UTF-8
		{0x12, 0x02, 0xed, 0xa0},             // field 2 holding a surrogate
		{0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01}, // field 2^29-1
	}
	for _, p := range decodedPlaces {
		msgs, _ := p.variants()
		for _, m := range msgs {
			b := marshal(t, m)
			for _, x := range bad {
				checkDecodeHand(t, x, p.top)
				checkDecodeHand(t, append(bytes.Clone(b), x...), p.top)
			}
			for i := range b {
				checkDecodeHand(t, b[:i], p.top)
				for _, flip := range []func(byte) byte{
					func(c byte) byte { return c ^ 0x80 },
					func(byte) byte { return 0xff },
					func(c byte) byte { return c ^ 0x07 },
					func(c byte) byte { return c + 1 },
				} {
					c := bytes.Clone(b)
					c[i] = flip(c[i])
					checkDecodeHand(t, c, p.top)
				}
			}
		}
	}
}

// seeds are the messages of places held in top's type, encoded.
func seeds(tb testing.TB, places []placed, top proto.Message) [][]byte {
	var out [][]byte
	for _, p := range places {
		if reflect.TypeOf(p.top()) != reflect.TypeOf(top) {
			continue
		}
		msgs, _ := p.variants()
		for _, m := range msgs {
			out = append(out, marshal(tb, m))
		}
	}
	return out
}

func fuzzDecode(f *testing.F, newMsg func() proto.Message) {
	for _, b := range seeds(f, decodedPlaces, newMsg()) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeHand(t, b, newMsg) })
}

func FuzzDecodeQueryRequest(f *testing.F) {
	fuzzDecode(f, func() proto.Message { return new(pb.QueryRequest) })
}

func FuzzDecodeGetRequest(f *testing.F) {
	fuzzDecode(f, func() proto.Message { return new(pb.GetRequest) })
}

func FuzzDecodeWriteRequest(f *testing.F) {
	fuzzDecode(f, func() proto.Message { return new(pb.WriteRequest) })
}

func FuzzDecodeWriteStreamRequest(f *testing.F) {
	fuzzDecode(f, func() proto.Message { return new(pb.WriteStreamRequest) })
}

func FuzzDecodeScanResponse(f *testing.F) {
	fuzzDecode(f, func() proto.Message { return new(pb.ScanResponse) })
}

func FuzzDecodeQueryResponse(f *testing.F) {
	fuzzDecode(f, func() proto.Message { return new(pb.QueryResponse) })
}

func FuzzDecodeGetResponse(f *testing.F) {
	fuzzDecode(f, func() proto.Message { return new(pb.GetResponse) })
}

func FuzzDecodeSearchResponse(f *testing.F) {
	fuzzDecode(f, func() proto.Message { return new(pb.SearchResponse) })
}

// FuzzDecodeWatchResponse also decodes each input split in two buffers into
// reused slabs, as a Watcher does.
func FuzzDecodeWatchResponse(f *testing.F) {
	for _, b := range seeds(f, decodedPlaces, new(pb.WatchResponse)) {
		f.Add(b)
	}
	var s WatchSlabs
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeHand(t, b, func() proto.Message { return new(pb.WatchResponse) })
		var want, got pb.WatchResponse
		werr := proto.Unmarshal(b, &want)
		half := len(b) / 2
		if !s.Decode([][]byte{b[:half], b[half:]}, len(b), &got) {
			s = WatchSlabs{} // another shape, proto.Unmarshal's alone
			return
		}
		if werr != nil {
			t.Fatalf("%x: decoded from buffers, proto.Unmarshal's error %v", b, werr)
		}
		if !proto.Equal(&want, &got) {
			t.Fatalf("%x: decoded from buffers\n%v\nproto.Unmarshal\n%v", b, &got, &want)
		}
	})
}

// fuzzEncode encodes, with encode and with proto.Marshal, every message
// that proto.Unmarshal makes of the fuzzed bytes. Nested messages lose their
// unknown fields first: the encoders' messages are the engine's own, whose
// nested messages never hold any, and the encoders do not look for them.
func fuzzEncode(f *testing.F, newMsg func() proto.Message, encode func(proto.Message) ([]byte, bool)) {
	for _, b := range seeds(f, encodedPlaces, newMsg()) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := newMsg()
		if proto.Unmarshal(b, m) != nil {
			return
		}
		clearNestedUnknown(m.ProtoReflect())
		got, ok := encode(m)
		if !ok {
			return
		}
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatalf("%v: encoded by hand, proto.Marshal's error %v", m, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: hand encoder writes\n%x\nproto.Marshal\n%x", m, got, want)
		}
	})
}

func clearNestedUnknown(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				e := v.List().Get(i).Message()
				e.SetUnknown(nil)
				clearNestedUnknown(e)
			}
		case fd.Message() != nil && !fd.IsMap():
			v.Message().SetUnknown(nil)
			clearNestedUnknown(v.Message())
		}
		return true
	})
}

func FuzzEncodeSearchResponse(f *testing.F) {
	fuzzEncode(f, func() proto.Message { return new(pb.SearchResponse) }, marshalHand)
}

func FuzzEncodeScanResponse(f *testing.F) {
	fuzzEncode(f, func() proto.Message { return new(pb.ScanResponse) }, marshalHand)
}

func FuzzEncodeQueryRequest(f *testing.F) {
	fuzzEncode(f, func() proto.Message { return new(pb.QueryRequest) }, marshalHand)
}

func FuzzEncodeGetRequest(f *testing.F) {
	fuzzEncode(f, func() proto.Message { return new(pb.GetRequest) }, marshalHand)
}

func FuzzEncodeGetResponse(f *testing.F) {
	fuzzEncode(f, func() proto.Message { return new(pb.GetResponse) }, marshalHand)
}

func FuzzEncodeQueryResponse(f *testing.F) {
	fuzzEncode(f, func() proto.Message { return new(pb.QueryResponse) }, marshalHand)
}

// FuzzSearchWriters holds the engine's search writers (writeSearch) to
// proto.Marshal.
func FuzzSearchWriters(f *testing.F) {
	f.Add(marshal(f, &pb.SearchResponse{
		Results: []*pb.ResultBatch{{Query: 1, Records: []*anypb.Any{{TypeUrl: "u", Value: []byte{1}}, {}}}, {}},
		Done:    []*pb.QueryDone{{Query: 300, Count: 2}},
		Errors:  []*pb.QueryError{{Query: 2, Code: 5, Message: "no", Field: "id"}},
	}))
	fuzzEncode(f, func() proto.Message { return new(pb.SearchResponse) }, writeSearch)
}
