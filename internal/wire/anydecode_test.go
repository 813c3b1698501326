package wire

import (
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// checkDecode wants Decode to accept b only when proto.Unmarshal decodes
// it into type_url and value alone, and then to give the same Any.
func checkDecode(t *testing.T, b []byte, last string) {
	t.Helper()
	if !utf8.ValidString(last) {
		return // last is a URL DecodeAny accepted before, or empty: never invalid
	}
	var want anypb.Any
	wantErr := proto.Unmarshal(b, &want)
	var got anypb.Any
	if !DecodeAny(b, &got, &last) {
		if wantErr == nil && len(want.ProtoReflect().GetUnknown()) == 0 {
			t.Fatalf("%x: refused, proto.Unmarshal decodes %v", b, &want)
		}
		return
	}
	if wantErr != nil {
		t.Fatalf("%x: accepted, proto.Unmarshal fails: %v", b, wantErr)
	}
	if !proto.Equal(&want, &got) {
		t.Fatalf("%x:\n got %v\nwant %v", b, &got, &want)
	}
}

func decodeSeeds() [][]byte {
	field := func(b []byte, num protowire.Number, v string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	return [][]byte{
		nil,
		field(field(nil, AnyTypeURL, "t/a"), AnyValue, "\x08\x01"),
		field(field(nil, AnyValue, "v"), AnyTypeURL, "t/a"),
		field(field(nil, AnyTypeURL, "t/a"), AnyTypeURL, "t/b"),
		field(nil, AnyTypeURL, "\xff"),
		field(nil, 3, "x"),
		protowire.AppendVarint(protowire.AppendTag(nil, AnyValue, protowire.VarintType), 1),
		protowire.AppendVarint(protowire.AppendTag(nil, AnyValue, protowire.BytesType), 5),
	}
}

func TestDecodeMatchesProto(t *testing.T) {
	for _, b := range decodeSeeds() {
		checkDecode(t, b, "")
		checkDecode(t, b, "t/a")
	}
}

func FuzzDecodeAny(f *testing.F) {
	for _, b := range decodeSeeds() {
		f.Add(b, "t/a")
	}
	f.Fuzz(checkDecode)
}
