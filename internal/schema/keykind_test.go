package schema

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/protobase/protobase/internal/keys"
)

// Every kind a key field may have maps to the key encoding the writer
// uses for it; the planner and the checker read keys through this table.
func TestKeyKind(t *testing.T) {
	for kind, want := range map[protoreflect.Kind]keys.Kind{
		protoreflect.Int32Kind: keys.KindInt, protoreflect.Int64Kind: keys.KindInt,
		protoreflect.Sint32Kind: keys.KindInt, protoreflect.Sint64Kind: keys.KindInt,
		protoreflect.Sfixed32Kind: keys.KindInt, protoreflect.Sfixed64Kind: keys.KindInt,
		protoreflect.EnumKind:   keys.KindInt,
		protoreflect.Uint32Kind: keys.KindUint, protoreflect.Uint64Kind: keys.KindUint,
		protoreflect.Fixed32Kind: keys.KindUint, protoreflect.Fixed64Kind: keys.KindUint,
		protoreflect.BoolKind:   keys.KindBool,
		protoreflect.FloatKind:  keys.KindFloat32,
		protoreflect.DoubleKind: keys.KindFloat64,
		protoreflect.StringKind: keys.KindString,
		protoreflect.BytesKind:  keys.KindBytes,
	} {
		if got := (KeyField{Kind: kind}).KeyKind(); got != want {
			t.Errorf("%v: key kind %v, want %v", kind, got, want)
		}
	}
}
