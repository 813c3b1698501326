package wire

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The hand coders are held to the generated code field by field: for
// every field of every coded message, a message holding that field alone
// (at the place the message takes in the message sent), and one holding
// every field at once, are coded by hand and by the generated code.

// placed is a coded message and where it lies in the message sent: the
// top-level message and the fields leading to it.
type placed struct {
	top  func() proto.Message
	path []protoreflect.Name
}

var decodedPlaces = []placed{
	{func() proto.Message { return new(pb.SearchRequest) }, nil},
	{func() proto.Message { return new(pb.SearchRequest) }, names("queries")},
	{func() proto.Message { return new(pb.SearchRequest) }, names("queries", "where")},
	{func() proto.Message { return new(pb.SearchRequest) }, names("queries", "where", "cmp")},
	{func() proto.Message { return new(pb.SearchRequest) }, names("queries", "where", "cmp", "value")},
	{func() proto.Message { return new(pb.GetRequest) }, nil},
	{func() proto.Message { return new(pb.GetRequest) }, names("keys")},
	{func() proto.Message { return new(pb.QueryRequest) }, nil},
	{func() proto.Message { return new(pb.QueryRequest) }, names("query")},
	{func() proto.Message { return new(pb.QueryRequest) }, names("query", "where")},
	{func() proto.Message { return new(pb.QueryRequest) }, names("query", "where", "cmp")},
	{func() proto.Message { return new(pb.QueryRequest) }, names("query", "where", "cmp", "value")},
	{func() proto.Message { return new(pb.WriteRequest) }, nil},
	{func() proto.Message { return new(pb.WriteRequest) }, names("records")},
	{func() proto.Message { return new(pb.WriteStreamRequest) }, nil},
	{func() proto.Message { return new(pb.WriteStreamRequest) }, names("records")},
	{func() proto.Message { return new(pb.ScanResponse) }, nil},
	{func() proto.Message { return new(pb.ScanResponse) }, names("records")},
	{func() proto.Message { return new(pb.QueryResponse) }, nil},
	{func() proto.Message { return new(pb.QueryResponse) }, names("records")},
	{func() proto.Message { return new(pb.GetResponse) }, nil},
	{func() proto.Message { return new(pb.GetResponse) }, names("records")},
	{func() proto.Message { return new(pb.SearchResponse) }, nil},
	{func() proto.Message { return new(pb.SearchResponse) }, names("results")},
	{func() proto.Message { return new(pb.SearchResponse) }, names("results", "records")},
	{func() proto.Message { return new(pb.SearchResponse) }, names("done")},
	{func() proto.Message { return new(pb.WatchResponse) }, nil},
	{func() proto.Message { return new(pb.WatchResponse) }, names("changes")},
	{func() proto.Message { return new(pb.WatchResponse) }, names("changes", "key")},
	{func() proto.Message { return new(pb.WatchResponse) }, names("changes", "position")},
	{func() proto.Message { return new(pb.WatchResponse) }, names("progress")},
}

var encodedPlaces = []placed{
	{func() proto.Message { return new(pb.SearchResponse) }, nil},
	{func() proto.Message { return new(pb.SearchResponse) }, names("results")},
	{func() proto.Message { return new(pb.SearchResponse) }, names("results", "records")},
	{func() proto.Message { return new(pb.SearchResponse) }, names("done")},
	{func() proto.Message { return new(pb.ScanResponse) }, nil},
	{func() proto.Message { return new(pb.ScanResponse) }, names("records")},
	{func() proto.Message { return new(pb.GetResponse) }, nil},
	{func() proto.Message { return new(pb.GetResponse) }, names("records")},
	{func() proto.Message { return new(pb.QueryResponse) }, nil},
	{func() proto.Message { return new(pb.QueryResponse) }, names("records")},
	{func() proto.Message { return new(pb.GetRequest) }, nil},
	{func() proto.Message { return new(pb.GetRequest) }, names("keys")},
	{func() proto.Message { return new(pb.QueryRequest) }, nil},
	{func() proto.Message { return new(pb.QueryRequest) }, names("query")},
	{func() proto.Message { return new(pb.QueryRequest) }, names("query", "where")},
	{func() proto.Message { return new(pb.QueryRequest) }, names("query", "where", "cmp")},
	{func() proto.Message { return new(pb.QueryRequest) }, names("query", "where", "cmp", "value")},
}

func names(n ...protoreflect.Name) []protoreflect.Name { return n }

// variants returns, for the message at p, a message sent holding one of
// its fields alone for each field (with that field's number), and one
// holding them all (number 0).
func (p placed) variants() (msgs []proto.Message, nums []protowire.Number) {
	md := p.build(nil).Descriptor()
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		top := p.top()
		setField(p.at(top), fd)
		msgs, nums = append(msgs, top), append(nums, fd.Number())
	}
	top := p.top()
	m := p.at(top)
	for i := range fields.Len() {
		setField(m, fields.Get(i))
	}
	return append(msgs, top), append(nums, 0)
}

// build returns the message at p in a new top-level message.
func (p placed) build(top proto.Message) protoreflect.Message {
	if top == nil {
		top = p.top()
	}
	return p.at(top)
}

// at creates the path to p's message in top and returns the message.
func (p placed) at(top proto.Message) protoreflect.Message {
	m := top.ProtoReflect()
	for _, name := range p.path {
		fd := m.Descriptor().Fields().ByName(name)
		if fd.IsList() {
			l := m.Mutable(fd).List()
			v := l.NewElement()
			l.Append(v)
			m = v.Message()
			continue
		}
		m = m.Mutable(fd).Message()
	}
	return m
}

// setField gives field fd of m a value other than its default: an element
// for a repeated field, an empty message for a message field.
func setField(m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	switch {
	case fd.IsList():
		l := m.Mutable(fd).List()
		if fd.Message() != nil {
			l.Append(l.NewElement())
		} else {
			l.Append(scalar(fd))
		}
	case fd.Message() != nil:
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
	default:
		m.Set(fd, scalar(fd))
	}
}

func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(-3)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-3)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1 << 40)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1.5)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("s")
	default:
		return protoreflect.ValueOfBytes([]byte("b"))
	}
}

// decodeHand decodes b into m (a new message of a top-level type with a
// hand decoder) with that decoder.
func decodeHand(b []byte, m proto.Message) error {
	switch m := m.(type) {
	case *pb.SearchRequest:
		return DecodeSearchRequest(b, m, nil)
	case *pb.QueryRequest:
		return DecodeQueryRequest(b, m)
	case *pb.GetRequest:
		return DecodeGetRequest(b, m)
	case *pb.WriteRequest:
		return DecodeWriteRequest(b, m)
	case *pb.WriteStreamRequest:
		return DecodeWriteStreamRequest(b, m)
	case *pb.ScanResponse:
		return DecodeScanResponse(b, m)
	case *pb.QueryResponse:
		return DecodeQueryResponse(b, m)
	case *pb.GetResponse:
		return DecodeGetResponse(b, m)
	case *pb.SearchResponse:
		return DecodeSearchResponse(b, m)
	case *pb.WatchResponse:
		return DecodeWatchResponse(b, m)
	}
	panic("no hand decoder for " + string(m.ProtoReflect().Descriptor().FullName()))
}

// checkDecodeHand fails unless the hand decoder of newMsg's type gives
// what proto.Unmarshal gives for b: the same message, or an error for the
// same inputs. The input is scribbled over after decoding, so that a
// message pointing into bytes its decoder does not own would show.
func checkDecodeHand(t *testing.T, b []byte, newMsg func() proto.Message) {
	t.Helper()
	want, got := newMsg(), newMsg()
	werr := proto.Unmarshal(b, want)
	in := bytes.Clone(b)
	gerr := decodeHand(in, got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%T %x: hand decoder's error %v, proto.Unmarshal's %v", want, b, gerr, werr)
	}
	if werr != nil {
		return
	}
	if !proto.Equal(want, got) {
		t.Fatalf("%T %x: hand decoder gives\n%v\nproto.Unmarshal\n%v", want, b, got, want)
	}
}

func TestDecodersFieldByField(t *testing.T) {
	for _, p := range decodedPlaces {
		msgs, _ := p.variants()
		for _, m := range msgs {
			b := marshal(t, m)
			checkDecodeHand(t, b, p.top)
			// The fields in the reverse of the generated code's order.
			checkDecodeHand(t, reverseFields(b), p.top)
		}
	}
}

// reverseFields returns the top-level fields of b in reverse order (b is
// well formed).
func reverseFields(b []byte) []byte {
	var fields [][]byte
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		n := l + protowire.ConsumeFieldValue(num, typ, b[l:])
		fields, b = append(fields, b[:n]), b[n:]
	}
	slices.Reverse(fields)
	return bytes.Join(fields, nil)
}

// handEncoders are the hand encoders of top-level messages, by the name
// Coders gives them; encode's ok is false for a message an encoder leaves
// to the generated code (or to the message path).
var handEncoders = []struct {
	coder  string
	top    proto.Message
	encode func(proto.Message) ([]byte, bool)
}{
	{"AppendSearchResponse", new(pb.SearchResponse), marshalHand},
	{"AppendScanResponse", new(pb.ScanResponse), marshalHand},
	{"AppendGetResponse", new(pb.GetResponse), marshalHand},
	{"AppendGetRequest", new(pb.GetRequest), marshalHand},
	{"AppendQueryRequest", new(pb.QueryRequest), marshalHand},
	{"AppendQueryResponse", new(pb.QueryResponse), marshalHand},
	{searchWriters, new(pb.SearchResponse), writeSearch},
}

// Each encoder writes the generated code's bytes for every field it
// handles and leaves the message to the generated code for every field it
// falls back for, as Coders declares.
func TestEncodersFieldByField(t *testing.T) {
	for _, p := range encodedPlaces {
		for _, enc := range handEncoders {
			if reflect.TypeOf(p.top()) != reflect.TypeOf(enc.top) {
				continue
			}
			checkEncoderFields(t, p, enc.coder, enc.encode)
		}
	}
}

func checkEncoderFields(t *testing.T, p placed, coder string, encode func(proto.Message) ([]byte, bool)) {
	t.Helper()
	msgs, nums := p.variants()
	md := p.build(nil).Descriptor()
	cov := coverageOf(t, md.FullName(), coder)
	for i, m := range msgs {
		got, ok := encode(m)
		want := marshal(t, m)
		if ok && !bytes.Equal(got, want) {
			t.Fatalf("%s with field %d: %s writes\n%x\nproto.Marshal\n%x", md.FullName(), nums[i], coder, got, want)
		}
		if nums[i] == 0 {
			continue
		}
		switch {
		case ok && !slices.Contains(cov.Handles, nums[i]):
			t.Errorf("%s field %d: encoded by %s, which does not declare it handled", md.FullName(), nums[i], cov.Coder)
		case !ok && !slices.Contains(cov.FallsBack, nums[i]):
			t.Errorf("%s field %d: left to proto.Marshal by %s, which does not declare it a fallback", md.FullName(), nums[i], cov.Coder)
		}
	}
}

// coverageOf returns the declared coverage of message name by coder (a
// list of functions, any of which may name it).
func coverageOf(t *testing.T, name protoreflect.FullName, coder string) Coverage {
	t.Helper()
	for _, c := range Coders {
		if c.Message != name || c.Direction != Encodes {
			continue
		}
		for _, fn := range strings.Split(coder, ", ") {
			if strings.Contains(c.Coder, fn) {
				return c
			}
		}
	}
	t.Fatalf("no coverage declared for %s by %s", name, coder)
	return Coverage{}
}
