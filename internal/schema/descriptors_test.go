package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
)

// decodeVia decodes b and reports whether the files were compiled again
// (compiled files are protocompile's linker.File; loaded ones are not).
func decodeVia(t *testing.T, b []byte) (s *State, compiled bool) {
	t.Helper()
	s, err := Decode(context.Background(), b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	_, compiled = s.Compiled.UserFiles[0].(linker.File)
	return s, compiled
}

// TestDecodeLoadsStoredDescriptors: a stored state is loaded from its
// compiled descriptors, not compiled again, and means the same as the state
// encoded; a state stored without descriptors (format 1), or whose
// descriptors cannot be read or belong to other sources, is compiled.
func TestDecodeLoadsStoredDescriptors(t *testing.T) {
	orig := sampleState(t)
	good, err := orig.Encode()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	tests := []struct {
		name         string
		in           []byte
		wantCompiled bool
	}{
		{"stored descriptors", good, false},
		{"format 2", edit(func(m map[string]any) { m["format"] = 2 }), false},
		{"format 1", edit(func(m map[string]any) {
			m["format"] = 1
			delete(m, "descriptors")
			delete(m, "sources_sha256")
		}), true},
		{"unreadable descriptors", edit(func(m map[string]any) { m["descriptors"] = "AAEC" }), true},
		{"descriptors of other sources", edit(func(m map[string]any) {
			files := m["files"].(map[string]any)
			files["orders.proto"] = files["orders.proto"].(string) + "\n// edited\n"
		}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, compiled := decodeVia(t, tt.in)
			if compiled != tt.wantCompiled {
				t.Fatalf("compiled again: %v, want %v", compiled, tt.wantCompiled)
			}
			checkInvariants(t, s)
			if fmt.Sprint(s.Describe()) != fmt.Sprint(orig.Describe()) {
				t.Errorf("types:\n%v\nwant\n%v", s.Describe(), orig.Describe())
			}
			// Planning the same files again over the decoded state changes
			// nothing but the retry of the failed index: the loaded
			// descriptors compare equal to compiled ones.
			r, err := Plan(context.Background(), s, PlanRequest{Files: s.Compiled.Files}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range r.Plan.TypesChanged {
				for _, c := range tc.Changes {
					if !strings.HasPrefix(c, "index city_age rebuilt") {
						t.Errorf("re-plan: %s: %s", tc.Type, c)
					}
				}
			}
			if _, err := s.Compiled.Registry.FindDescriptorByName("google.protobuf.Timestamp"); err != nil {
				t.Errorf("registry lacks the imports: %v", err)
			}
		})
	}
	// The stored bytes survive a round trip unchanged.
	s, _ := decodeVia(t, good)
	again, err := s.Encode()
	if err != nil || !bytes.Equal(again, good) {
		t.Fatalf("round trip: %v\n%s\n%s", err, good, again)
	}
}

// The descriptor set of GetSchema holds what decoding the user's types
// needs: imports used for options only, or not at all, are left out and
// dropped from the dependencies; an import used for a type, for custom
// options of the user's own (descriptor.proto), or through a public
// import is kept.
func TestDescriptorSetHoldsUsedImports(t *testing.T) {
	files := map[string]string{
		"a.proto": record("message A {\n  option (protobase.v1.record) = { primary_key: \"id\" };\n  int64 id = 1;\n  google.protobuf.Timestamp at = 2;\n}\n",
			"google/protobuf/timestamp.proto", "google/protobuf/duration.proto", "pub.proto"),
		"pub.proto": "syntax = \"proto3\";\nimport public \"google/protobuf/timestamp.proto\";\n",
		"opt.proto": "syntax = \"proto3\";\npackage o;\nimport \"google/protobuf/descriptor.proto\";\n" +
			"extend google.protobuf.FieldOptions { string label = 50001; }\n",
	}
	c, err := Compile(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	set := usedDescriptorSet(c.ordered, c.Files)
	got := map[string][]string{}
	for _, f := range set.File {
		got[f.GetName()] = f.Dependency
	}
	want := map[string][]string{
		"a.proto":                          {"google/protobuf/timestamp.proto", "pub.proto"},
		"pub.proto":                        {"google/protobuf/timestamp.proto"},
		"opt.proto":                        {"google/protobuf/descriptor.proto"},
		"google/protobuf/timestamp.proto":  nil,
		"google/protobuf/descriptor.proto": nil,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("files and dependencies:\n got %v\nwant %v", got, want)
	}
	for _, f := range set.File {
		if f.GetName() == "pub.proto" && !slices.Equal(f.PublicDependency, []int32{0}) {
			t.Errorf("pub.proto public dependencies: %v", f.PublicDependency)
		}
	}
	reg, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("set does not link: %v", err)
	}
	if _, err := reg.FindDescriptorByName("shop.A"); err != nil {
		t.Fatal(err)
	}

	// One record type with the record option: no descriptor.proto.
	c, err = Compile(context.Background(), map[string]string{"a.proto": record("message A {\n  option (protobase.v1.record) = { primary_key: \"id\" };\n  int64 id = 1;\n}\n")})
	if err != nil {
		t.Fatal(err)
	}
	set = usedDescriptorSet(c.ordered, c.Files)
	if len(set.File) != 1 || len(set.File[0].Dependency) != 0 || proto.Size(set) > 1000 {
		t.Fatalf("one record type: %d files, %d bytes: %v", len(set.File), proto.Size(set), set)
	}
	if _, err := protodesc.NewFiles(set); err != nil {
		t.Fatal(err)
	}
}
