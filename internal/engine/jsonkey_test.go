package engine_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

var jsonKeyLiterals = []string{
	`0`, `1`, `-1`, `1.5`, `-0`, `1e3`, `2147483647`, `2147483648`, `-2147483648`, `-2147483649`, `4294967295`, `4294967296`,
	`1e19`, `1e300`, `-1e300`, `3.4028235e38`, `3.5e38`,
	`"0"`, `"12"`, `"-3"`, `"1e3"`, `"1.5"`, `" 1"`, `"0x10"`, `"9223372036854775807"`, `"9223372036854775808"`, `"-9223372036854775808"`,
	`"18446744073709551615"`, `"18446744073709551616"`, `"NaN"`, `"Infinity"`, `"-Infinity"`, `"inf"`,
	`true`, `false`, `""`, `"abc"`, `"héllo"`, `"AAE="`, `"AAE"`, `"_-8="`, `"_-8"`, `"a b"`, `"E_ONE"`, `"E_TWO"`, `7`,
}

// kindsProto has one record type per key kind, keyed by field k.
var kindsProto = func() string {
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\npackage kinds;\nimport \"protobase/v1/options.proto\";\nenum E { E_ZERO = 0; E_ONE = 1; }\n")
	for _, k := range keyKinds {
		fmt.Fprintf(&b, "message K_%s {\n  option (protobase.v1.record) = { primary_key: \"k\" };\n  %s k = 1;\n}\n", k, k)
	}
	return b.String()
}()

var keyKinds = []string{"int32", "sint32", "sfixed32", "int64", "sint64", "sfixed64", "uint32", "fixed32", "uint64", "fixed64", "float", "double", "bool", "string", "bytes", "E"}

// A JSON key means what protojson makes of it: Get accepts exactly the
// values protojson accepts for the key field (null aside, which protojson
// reads as the default and Get refuses), and finds the record that
// protojson's message of the same JSON is stored as. A key number is a
// google.protobuf.Value, a double, before the server sees it (so
// 9007199254740993 arrives as ...992: 64-bit keys beyond 2^53 travel as
// strings); protojson is given the number as the server receives it.
func TestJSONKeysAgreeWithProtojson(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"kinds.proto": kindsProto})
	for _, kind := range keyKinds {
		for _, lit := range jsonKeyLiterals {
			checkJSONKey(t, te, kind, lit)
		}
	}
}

// FuzzJSONKeys is TestJSONKeysAgreeWithProtojson on any literal.
func FuzzJSONKeys(f *testing.F) {
	te := openEngine(f, f.TempDir(), engine.Options{})
	te.Apply(map[string]string{"kinds.proto": kindsProto})
	for i, lit := range jsonKeyLiterals {
		f.Add(uint8(i), lit)
	}
	f.Fuzz(func(t *testing.T, kind uint8, lit string) {
		checkJSONKey(t, te, keyKinds[int(kind)%len(keyKinds)], lit)
	})
}

// checkJSONKey checks that Get of the JSON key lit of a K_kind agrees with
// protojson, storing the record when it is new. A literal that is not one
// JSON scalar is skipped.
func checkJSONKey(t *testing.T, te *testEngine, kind, lit string) {
	t.Helper()
	typ := "kinds.K_" + kind
	md := te.E.Schema().Types[protoreflect.FullName(typ)].Desc
	v := new(structpb.Value)
	if err := protojson.Unmarshal([]byte(lit), v); err != nil {
		return
	}
	switch v.GetKind().(type) {
	case *structpb.Value_NullValue, *structpb.Value_ListValue, *structpb.Value_StructValue:
		return // null is refused; a list or an object is the key, not a field's value
	}
	// protojson reads the value as the server receives it: a number is a
	// double by then.
	sent, err := protojson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(md)
	pjErr := protojson.Unmarshal([]byte(`{"k": `+string(sent)+`}`), m)
	resp, getErr := getRecords(te.E, t.Context(), &pb.GetRequest{Type: typ, Keys: []*structpb.Value{v}})
	if (pjErr == nil) != (getErr == nil) {
		t.Fatalf("%s key %s: protojson error %v, Get error %v", kind, lit, pjErr, getErr)
	}
	if pjErr != nil {
		return
	}
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Records) == 0 {
		w := te.E.NewWriter() // not te.write: its context is the fuzz target's F
		err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{{TypeUrl: "type.googleapis.com/" + typ, Value: want}}})
		if err == nil {
			_, err = w.Sync()
		}
		w.Close()
		if err != nil {
			t.Fatalf("%s key %s: insert: %v", kind, lit, err)
		}
		if resp, err = getRecords(te.E, t.Context(), &pb.GetRequest{Type: typ, Keys: []*structpb.Value{v}}); err != nil {
			t.Fatal(err)
		}
	}
	// -0 and 0 are one key; the record stored first answers both.
	if len(resp.Records) != 1 || (!bytes.Equal(resp.Records[0].Value, want) && !sameKey(md, resp.Records[0].Value, m)) {
		t.Fatalf("%s key %s: Get found %v, want the record protojson built (% x)", kind, lit, resp, want)
	}
}

// sameKey reports whether the record bytes b hold the key field value m holds.
func sameKey(md protoreflect.MessageDescriptor, b []byte, m *dynamicpb.Message) bool {
	got := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(b, got); err != nil {
		return false
	}
	fd := md.Fields().ByName("k")
	return got.Get(fd).Interface() == m.Get(fd).Interface()
}
