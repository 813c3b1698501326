package schema

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/protobase/protobase/internal/testschema"
)

// usersProto is the example of the record option in options.proto, verbatim.
const usersProto = testschema.ShopOptionExample

// record returns a proto3 file of package shop importing options.proto.
func record(body string, imports ...string) string {
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\npackage shop;\nimport \"protobase/v1/options.proto\";\n")
	for _, imp := range imports {
		b.WriteString("import \"" + imp + "\";\n")
	}
	b.WriteString("\n" + body)
	return b.String()
}

func TestCompile(t *testing.T) {
	type index struct {
		name   string
		fields []string
		unique bool
	}
	type typ struct {
		pk      []string
		kinds   []protoreflect.Kind
		indexes []index
	}
	tests := []struct {
		name  string
		files map[string]string
		want  map[protoreflect.FullName]typ
	}{{
		name:  "option syntax of options.proto",
		files: map[string]string{"users.proto": usersProto},
		want: map[protoreflect.FullName]typ{"shop.User": {
			pk: []string{"id"}, kinds: []protoreflect.Kind{protoreflect.Int64Kind},
			indexes: []index{{"name", []string{"name"}, false}, {"country_city", []string{"country", "city"}, true}},
		}},
	}, {
		name: "nested paths",
		files: map[string]string{"a.proto": record(`
message Key { string tenant = 1; uint64 id = 2; }
message Address { string city = 1; Geo geo = 2; }
message Geo { double lat = 1; double lng = 2; }
message Place {
  option (protobase.v1.record) = {
    primary_key: ["key.tenant", "key.id"]
    index: { fields: "address.city" }
    index: { fields: ["address.geo.lat", "address.geo.lng"] name: "by_position" }
  };
  Key key = 1;
  Address address = 2;
}
`)},
		want: map[protoreflect.FullName]typ{"shop.Place": {
			pk: []string{"key.tenant", "key.id"}, kinds: []protoreflect.Kind{protoreflect.StringKind, protoreflect.Uint64Kind},
			indexes: []index{{"address_city", []string{"address.city"}, false}, {"by_position", []string{"address.geo.lat", "address.geo.lng"}, false}},
		}},
	}, {
		name: "imports between user files",
		files: map[string]string{
			"common/address.proto": "syntax = \"proto3\";\npackage common;\nmessage Address { string city = 1; }\nenum Status { UNKNOWN = 0; ACTIVE = 1; }\n",
			"shop/customer.proto": record(`
message Customer {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "address.city" } index: { fields: "status" } };
  bytes id = 1;
  common.Address address = 2;
  common.Status status = 3;
}
`, "common/address.proto"),
		},
		want: map[protoreflect.FullName]typ{"shop.Customer": {
			pk: []string{"id"}, kinds: []protoreflect.Kind{protoreflect.BytesKind},
			indexes: []index{{"address_city", []string{"address.city"}, false}, {"status", []string{"status"}, false}},
		}},
	}, {
		name: "well-known imports",
		files: map[string]string{"events.proto": record(`
message Event {
  option (protobase.v1.record) = { primary_key: ["source", "at.seconds", "at.nanos"] };
  string source = 1;
  google.protobuf.Timestamp at = 2;
  google.protobuf.Struct payload = 3;
}
`, "google/protobuf/timestamp.proto", "google/protobuf/struct.proto")},
		want: map[protoreflect.FullName]typ{"shop.Event": {
			pk:    []string{"source", "at.seconds", "at.nanos"},
			kinds: []protoreflect.Kind{protoreflect.StringKind, protoreflect.Int64Kind, protoreflect.Int32Kind},
		}},
	}, {
		name: "every keyable kind, nested record types, maps and helpers",
		files: map[string]string{"kinds.proto": record(`
enum Color { COLOR_UNSPECIFIED = 0; RED = 1; }
message Outer {
  message Inner {
    option (protobase.v1.record) = { primary_key: ["a", "b", "c", "d", "e", "f", "g", "h"] index: { fields: ["i", "j", "k", "l", "m", "n", "o"] } };
    int32 a = 1; sint32 b = 2; sfixed32 c = 3; int64 d = 4; sint64 e = 5; sfixed64 f = 6;
    uint32 g = 7; fixed32 h = 8; uint64 i = 9; fixed64 j = 10; bool k = 11; float l = 12;
    double m = 13; Color n = 14; optional string o = 15;
    map<string, Outer> children = 16;
    repeated string tags = 17;
  }
  map<int32, Inner> inners = 1;
}
`)},
		want: map[protoreflect.FullName]typ{"shop.Outer.Inner": {
			pk: []string{"a", "b", "c", "d", "e", "f", "g", "h"},
			kinds: []protoreflect.Kind{protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.Int64Kind,
				protoreflect.Sint64Kind, protoreflect.Sfixed64Kind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind},
			indexes: []index{{"i_j_k_l_m_n_o", []string{"i", "j", "k", "l", "m", "n", "o"}, false}},
		}},
	}, {
		name:  "no record types",
		files: map[string]string{"plain.proto": "syntax = \"proto3\";\npackage p;\nmessage M { string a = 1; }\n"},
		want:  map[protoreflect.FullName]typ{},
	}, {
		name:  "no files",
		files: map[string]string{},
		want:  map[protoreflect.FullName]typ{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(context.Background(), tt.files)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if len(c.Types) != len(tt.want) {
				t.Fatalf("got %d record types, want %d", len(c.Types), len(tt.want))
			}
			for name, want := range tt.want {
				rt := c.Types[name]
				if rt == nil {
					t.Fatalf("no record type %s", name)
				}
				if rt.Name != name || rt.Desc.FullName() != name {
					t.Errorf("name %s, desc %s", rt.Name, rt.Desc.FullName())
				}
				if got := keyPaths(rt.PrimaryKey); !slices.Equal(got, want.pk) {
					t.Errorf("primary key %v, want %v", got, want.pk)
				}
				for i, k := range rt.PrimaryKey {
					if k.Kind != want.kinds[i] || len(k.Fields) != strings.Count(k.Path, ".")+1 || k.Fields[len(k.Fields)-1].Kind() != k.Kind {
						t.Errorf("key field %s: kind %v (%d fields), want %v", k.Path, k.Kind, len(k.Fields), want.kinds[i])
					}
				}
				if len(rt.Indexes) != len(want.indexes) {
					t.Fatalf("got %d indexes, want %d", len(rt.Indexes), len(want.indexes))
				}
				for i, ix := range rt.Indexes {
					w := want.indexes[i]
					if ix.Name != w.name || !slices.Equal(keyPaths(ix.Fields), w.fields) || ix.Unique != w.unique || ix.Type != name {
						t.Errorf("index %d: %+v, want %+v", i, ix, w)
					}
				}
			}
			for name := range tt.files {
				if c.Registry == nil {
					t.Fatal("nil registry")
				}
				if _, err := c.Registry.FindFileByPath(name); err != nil {
					t.Errorf("registry lacks %s: %v", name, err)
				}
			}
			if len(c.UserFiles) != len(tt.files) {
				t.Errorf("linked %d files, want %d", len(c.UserFiles), len(tt.files))
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		// want are regular expressions, one per expected error, in order.
		want []string
	}{{
		name:  "syntax error",
		files: map[string]string{"a.proto": "syntax = \"proto3\";\npackage a;\nmessage M { int32 x = 1 }\n"},
		want:  []string{`^a\.proto:3:25: syntax error: .*`},
	}, {
		name:  "unresolved import",
		files: map[string]string{"a.proto": "syntax = \"proto3\";\npackage a;\nimport \"missing.proto\";\nmessage M { int32 x = 1; }\n"},
		want:  []string{`^a\.proto:3:8: import "missing\.proto": no such file`},
	}, {
		name: "unresolved import in two files, and a file importing a broken one",
		files: map[string]string{
			"a.proto": "syntax = \"proto3\";\nimport \"x.proto\";\n",
			"b.proto": "syntax = \"proto3\";\nimport \"y.proto\";\n",
			"c.proto": "syntax = \"proto3\";\nimport \"a.proto\";\n",
		},
		want: []string{`^a\.proto:2:8: import "x\.proto"`, `^b\.proto:2:8: import "y\.proto"`},
	}, {
		name:  "record option naming a missing field",
		files: map[string]string{"users.proto": record("message User {\n  option (protobase.v1.record) = { primary_key: \"idd\" };\n  int64 id = 1;\n}\n")},
		want:  []string{`^users\.proto:5:9: type shop\.User: primary_key "idd": no field "idd"$`},
	}, {
		name:  "missing nested field",
		files: map[string]string{"users.proto": record("message A { string zip = 1; }\nmessage User {\n  option (protobase.v1.record) = { primary_key: \"a.zipp\" };\n  A a = 1;\n}\n")},
		want:  []string{`^users\.proto:6:9: type shop\.User: primary_key "a\.zipp": no field "zipp" in message shop\.A$`},
	}, {
		name:  "nested record type",
		files: map[string]string{"users.proto": record("message Outer {\n  message Inner {\n    option (protobase.v1.record) = {};\n  }\n}\n")},
		want:  []string{`^users\.proto:6:11: type shop\.Outer\.Inner: primary_key is required$`},
	}, {
		name:  "primary key on a repeated field",
		files: map[string]string{"users.proto": record("message User {\n  option (protobase.v1.record) = { primary_key: \"tags\" };\n  repeated string tags = 1;\n}\n")},
		want:  []string{`^users\.proto:5:9: type shop\.User: primary_key "tags": field "tags" is repeated`},
	}, {
		name:  "primary key on a message field",
		files: map[string]string{"users.proto": record("message A { string zip = 1; }\nmessage User {\n  option (protobase.v1.record) = { primary_key: \"a\" };\n  A a = 1;\n}\n")},
		want:  []string{`^users\.proto:6:9: type shop\.User: primary_key "a": field "a" is a message \(shop\.A\)`},
	}, {
		name:  "key through a repeated message, a map and a scalar",
		files: map[string]string{"users.proto": record("message A { string zip = 1; }\nmessage User {\n  option (protobase.v1.record) = { primary_key: \"as.zip\" index: { fields: \"m\" } index: { fields: \"id.x\" } };\n  repeated A as = 1;\n  map<string, string> m = 2;\n  int64 id = 3;\n}\n")},
		want: []string{
			`^users\.proto:6:9: type shop\.User: index "id_x": field "id\.x": field "id" is a int64, not a message`,
			`^users\.proto:6:9: type shop\.User: index "m": field "m": field "m" is a map`,
			`^users\.proto:6:9: type shop\.User: primary_key "as\.zip": field "as" is repeated`,
		},
	}, {
		name:  "duplicate index name",
		files: map[string]string{"users.proto": record("message User {\n  option (protobase.v1.record) = { primary_key: \"id\" index: { fields: \"name\" } index: { fields: [\"id\", \"name\"] name: \"name\" } };\n  int64 id = 1;\n  string name = 2;\n}\n")},
		want:  []string{`^users\.proto:5:9: type shop\.User: index name "name" used twice$`},
	}, {
		name:  "no primary key, duplicate key field, index equal to primary key, empty index, bad name",
		files: map[string]string{"users.proto": record("message User {\n  option (protobase.v1.record) = { index: { fields: [\"a\", \"a\"] } };\n  int64 a = 1;\n}\nmessage Other {\n  option (protobase.v1.record) = { primary_key: \"a\" index: { fields: \"a\" name: \"by_a\" } index: { unique: true } index: { fields: \"a\" name: \"1x\" } };\n  int64 a = 1;\n}\n")},
		want: []string{
			`^users\.proto:5:9: type shop\.User: index "a_a": field "a" listed twice$`,
			`^users\.proto:5:9: type shop\.User: primary_key is required$`,
			`^users\.proto:9:9: type shop\.Other: index "1x": name must be`,
			`^users\.proto:9:9: type shop\.Other: index "by_a": same fields as the primary key$`,
			`^users\.proto:9:9: type shop\.Other: index 2 \(""\): no fields$`,
		},
	}, {
		name: "two errors in two files",
		files: map[string]string{
			"a.proto": "syntax = \"proto3\";\npackage a;\nmessage M { int32 x = 1 }\n",
			"b.proto": record("message User {\n  option (protobase.v1.record) = { primary_key: \"nope\" };\n  int64 id = 1;\n}\n"),
		},
		want: []string{`^a\.proto:3:25: syntax error`, `^b\.proto:5:9: type shop\.User: primary_key "nope": no field "nope"`},
	}, {
		name: "link errors in two files",
		files: map[string]string{
			"a.proto": "syntax = \"proto3\";\npackage a;\nmessage M { Unknown x = 1; }\n",
			"b.proto": "syntax = \"proto3\";\npackage b;\nmessage M { int32 x = 1; int32 y = 1; }\n",
		},
		want: []string{`^a\.proto:3:13: .*Unknown`, `^b\.proto:3:36: .*same tag 1`},
	}, {
		name:  "invalid UTF-8",
		files: map[string]string{"a.proto": "syntax = \"proto3\";\n// caf\xe9\n", "b\xff.proto": ""},
		want:  []string{`^a\.proto:2:7: invalid UTF-8`, `^b\x{fffd}\.proto: file name must be a clean relative path`},
	}, {
		name:  "reserved and bad file names",
		files: map[string]string{"protobase/v1/options.proto": "syntax = \"proto3\";\n", "google/protobuf/any.proto": "", "../x.proto": "", "x.txt": ""},
		want:  []string{`^\.\./x\.proto: file name must be a clean relative path`, `^google/protobuf/any\.proto: file name is reserved`, `^protobase/v1/options\.proto: file name is reserved`, `^x\.txt: file name must end in \.proto`},
	}, {
		name:  "duplicate symbol across files",
		files: map[string]string{"a.proto": "syntax = \"proto3\";\npackage p;\nmessage M {}\n", "b.proto": "syntax = \"proto3\";\npackage p;\nmessage M {}\n"},
		want:  []string{`^[ab]\.proto:3:9: symbol "p\.M" already defined`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(context.Background(), tt.files)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile = %v, %v; want *CompileError", c, err)
			}
			if len(ce.Errors) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(ce.Errors), len(tt.want), ce)
			}
			for i, re := range tt.want {
				if !regexp.MustCompile(re).MatchString(ce.Errors[i]) {
					t.Errorf("error %d = %q, want match of %s", i, ce.Errors[i], re)
				}
			}
			if err.Error() != strings.Join(ce.Errors, "\n") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestCompileCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compile(ctx, map[string]string{"users.proto": usersProto}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Compile on a canceled context = %v", err)
	}
}

// TestCompileConcurrent runs compilations in parallel: the built-in files are
// shared between them and must not be mutated (run with -race).
func TestCompileConcurrent(t *testing.T) {
	files := map[string]string{"users.proto": usersProto, "events.proto": record(`
message Event {
  option (protobase.v1.record) = { primary_key: "at.seconds" };
  google.protobuf.Timestamp at = 1;
}
`, "google/protobuf/timestamp.proto", "google/protobuf/descriptor.proto")}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			c, err := Compile(context.Background(), files)
			if err == nil && len(c.Types) != 2 {
				err = errors.New("wrong number of types")
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestBuiltinImports(t *testing.T) {
	for name, want := range map[string]bool{
		OptionsPath:                       true,
		"google/api/annotations.proto":    true,
		"google/protobuf/timestamp.proto": true,
		"protobase/v1/protobase.proto":    false, // the API is not part of schemas
	} {
		_, err := Compile(context.Background(), map[string]string{"a.proto": "syntax = \"proto3\";\nimport \"" + name + "\";\n"})
		if (err == nil) != want {
			t.Errorf("import %s: %v", name, err)
		}
	}
}
