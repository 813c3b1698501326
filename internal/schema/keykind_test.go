package schema

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/protobase/protobase/internal/orderedcode"
)

// Every kind a key field may have maps to the key encoding the writer
// uses for it; the planner and the checker read keys through this table.
func TestKeyKind(t *testing.T) {
	for kind, want := range map[protoreflect.Kind]orderedcode.Kind{
		protoreflect.Int32Kind: orderedcode.KindInt, protoreflect.Int64Kind: orderedcode.KindInt,
		protoreflect.Sint32Kind: orderedcode.KindInt, protoreflect.Sint64Kind: orderedcode.KindInt,
		protoreflect.Sfixed32Kind: orderedcode.KindInt, protoreflect.Sfixed64Kind: orderedcode.KindInt,
		protoreflect.EnumKind:   orderedcode.KindInt,
		protoreflect.Uint32Kind: orderedcode.KindUint, protoreflect.Uint64Kind: orderedcode.KindUint,
		protoreflect.Fixed32Kind: orderedcode.KindUint, protoreflect.Fixed64Kind: orderedcode.KindUint,
		protoreflect.BoolKind:   orderedcode.KindBool,
		protoreflect.FloatKind:  orderedcode.KindFloat32,
		protoreflect.DoubleKind: orderedcode.KindFloat64,
		protoreflect.StringKind: orderedcode.KindString,
		protoreflect.BytesKind:  orderedcode.KindBytes,
	} {
		if got := (KeyField{Kind: kind}).KeyKind(); got != want {
			t.Errorf("%v: key kind %v, want %v", kind, got, want)
		}
	}
}
