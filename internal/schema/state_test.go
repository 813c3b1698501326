package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
)

// sampleState is a state after two plans, with one index built.
func sampleState(t *testing.T) *State {
	t.Helper()
	ctx := context.Background()
	files := withFiles(userFile(`primary_key: "id" index: { fields: "name" } index: { fields: ["address.city", "age"] unique: true name: "city_age" }`, baseFields, baseAddress),
		map[string]string{"orders.proto": orderFile, "events.proto": record(`
message Event {
  option (protobase.v1.record) = { primary_key: ["at.seconds", "at.nanos"] };
  google.protobuf.Timestamp at = 1;
  string html = 2; // <b>&amp;</b>
}
`, "google/protobuf/timestamp.proto")})
	r, err := Plan(ctx, nil, PlanRequest{Files: baseUser()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err = Plan(ctx, r.State, PlanRequest{Files: files}, func(*RecordType) (uint64, error) { return 5, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(r.BuildIndexes) != 2 {
		t.Fatalf("build %v", r.BuildIndexes)
	}
	return r.State.
		WithIndexState("shop.User", "name", protobasev1.IndexState_INDEX_STATE_READY, "").
		WithIndexState("shop.User", "city_age", protobasev1.IndexState_INDEX_STATE_FAILED, `duplicate key ("Paris", 3)`)
}

func TestEncodeDecode(t *testing.T) {
	ctx := context.Background()
	for name, s := range map[string]*State{"empty": Empty(), "sample": sampleState(t)} {
		t.Run(name, func(t *testing.T) {
			b1, err := s.Encode()
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				if b, _ := s.Encode(); !bytes.Equal(b, b1) {
					t.Fatalf("Encode is not deterministic:\n%s\n%s", b, b1)
				}
			}
			d, err := Decode(ctx, b1)
			if err != nil {
				t.Fatalf("Decode: %v\n%s", err, b1)
			}
			b2, err := d.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b1, b2) {
				t.Fatalf("round trip differs:\n%s\n%s", b1, b2)
			}
			if d.Version != s.Version || d.NextTypeID != s.NextTypeID || d.NextIndexID != s.NextIndexID {
				t.Errorf("decoded %+v, want %+v", d, s)
			}
			if got, want := prototext.Format(&protobasev1.GetSchemaResponse{Types: d.Describe()}), prototext.Format(&protobasev1.GetSchemaResponse{Types: s.Describe()}); got != want {
				t.Errorf("Describe after round trip:\n%s\nwant:\n%s", got, want)
			}
			checkInvariants(t, d)
			// A decoded state plans like the original: no change but the
			// retry of the failed index.
			r, err := Plan(ctx, d, PlanRequest{Files: s.Compiled.Files}, nil)
			if err != nil {
				t.Fatalf("re-plan of decoded state: %v", err)
			}
			wantPlan := ""
			if name == "sample" {
				wantPlan = `types_changed:{type:"shop.User" changes:"index city_age rebuilt (it had failed: duplicate key (\"Paris\", 3))"}` +
					` indexes_added:{type:"shop.User" index:"city_age" fields:"address.city" fields:"age" unique:true}` +
					` indexes_dropped:{type:"shop.User" index:"city_age" fields:"address.city" fields:"age" unique:true}`
			}
			want := new(protobasev1.SchemaPlan)
			if err := prototext.Unmarshal([]byte(wantPlan), want); err != nil {
				t.Fatal(err)
			}
			if !equalPlans(r.Plan, want) || r.Changed != (wantPlan != "") {
				t.Errorf("re-plan of decoded state: changed %v, plan %v", r.Changed, r.Plan)
			}
		})
	}
}

func TestEncodeFormat(t *testing.T) {
	b, err := sampleState(t).Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"format":3`, `"version":2`, `"next_type_id":4`, `"next_index_id":4`,
		`{"name":"shop.User","id":1,"primary_key":["id"],"indexes":[{"name":"name","id":2,"fields":["name"],"state":"INDEX_STATE_READY"},{"name":"city_age","id":3,"fields":["address.city","age"],"unique":true,"state":"INDEX_STATE_FAILED","error":"duplicate key (\"Paris\", 3)"}]}`,
		`<b>&amp;</b>`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("encoding lacks %s:\n%s", want, b)
		}
	}
}

// A state is written in the current format, which StoredFormat reads; a
// state of a later format is refused, naming it as the newer side.
func TestFormats(t *testing.T) {
	b, err := sampleState(t).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if f, err := StoredFormat(b); err != nil || f != Format {
		t.Fatalf("StoredFormat = %d, %v; want %d", f, err, Format)
	}
	if _, err := StoredFormat([]byte("{")); err == nil {
		t.Fatal("StoredFormat of garbage succeeded")
	}
	later := bytes.Replace(b, []byte(`"format":3`), []byte(`"format":4`), 1)
	_, err = Decode(context.Background(), later)
	if err == nil || !strings.Contains(err.Error(), "format 4 is newer than this binary reads (formats 1 to 3)") ||
		!strings.Contains(err.Error(), "later release") {
		t.Fatalf("Decode of format 4: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good, err := sampleState(t).Encode()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	typ := func(m map[string]any, i int) map[string]any { return m["types"].([]any)[i].(map[string]any) }
	tests := map[string]string{
		"garbage":       "{",
		"unknown field": edit(func(m map[string]any) { m["extra"] = 1 }),
		"format 0":      edit(func(m map[string]any) { m["format"] = 0 }),
		"format 4":      edit(func(m map[string]any) { m["format"] = 4 }),
		"zero counter":  edit(func(m map[string]any) { m["next_index_id"] = 0 }),
		"bad source":    edit(func(m map[string]any) { m["files"].(map[string]any)["orders.proto"] = "nope" }),
		"missing type":  edit(func(m map[string]any) { m["types"] = m["types"].([]any)[1:] }),
		"unknown type":  edit(func(m map[string]any) { typ(m, 0)["name"] = "shop.Nope" }),
		"duplicate id":  edit(func(m map[string]any) { typ(m, 0)["id"] = typ(m, 1)["id"] }),
		"id too large":  edit(func(m map[string]any) { typ(m, 0)["id"] = 99 }),
		"primary key":   edit(func(m map[string]any) { typ(m, 2)["primary_key"] = []string{"name"} }),
		"index fields":  edit(func(m map[string]any) { typ(m, 2)["indexes"].([]any)[0].(map[string]any)["fields"] = []string{"age"} }),
		"index state": edit(func(m map[string]any) {
			typ(m, 2)["indexes"].([]any)[0].(map[string]any)["state"] = "INDEX_STATE_UNSPECIFIED"
		}),
		"index id reuse": edit(func(m map[string]any) { typ(m, 2)["indexes"].([]any)[0].(map[string]any)["id"] = 1 }),
		"index missing":  edit(func(m map[string]any) { typ(m, 2)["indexes"] = typ(m, 2)["indexes"].([]any)[1:] }),
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(context.Background(), []byte(in)); err == nil {
				t.Errorf("Decode(%s) succeeded", in)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	s := sampleState(t)
	for _, tt := range []struct {
		url  string
		want protoreflect.FullName
	}{
		{"type.googleapis.com/shop.User", "shop.User"},
		{"example.com/path/to/shop.Order", "shop.Order"},
		{"/shop.Event", "shop.Event"},
		{"shop.User", "shop.User"},
		{"type.googleapis.com/shop.Address", ""}, // a helper, not a record type
		{"type.googleapis.com/", ""},
		{"", ""},
		{"shop.user", ""},
	} {
		rt, ok := s.Lookup(tt.url)
		if (tt.want == "") == ok || ok && rt.Name != tt.want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", tt.url, rt, ok, tt.want)
		}
	}
}

func TestWithIndexState(t *testing.T) {
	s := sampleState(t)
	u := s.Types["shop.User"]
	ns := s.WithIndexState("shop.User", "city_age", protobasev1.IndexState_INDEX_STATE_READY, "")
	if ns == s || ns.Version != s.Version {
		t.Fatalf("WithIndexState returned %p (old %p), version %d", ns, s, ns.Version)
	}
	if ix, _ := ns.Types["shop.User"].Index("city_age"); ix.State != protobasev1.IndexState_INDEX_STATE_READY || ix.Error != "" || ix.ID != 3 {
		t.Errorf("new index %+v", ix)
	}
	if ix, _ := s.Types["shop.User"].Index("city_age"); ix.State != protobasev1.IndexState_INDEX_STATE_FAILED || s.Types["shop.User"] != u {
		t.Errorf("old state changed: %+v", ix)
	}
	if ns.ByID[u.ID] != ns.Types["shop.User"] || ns.Types["shop.Order"] != s.Types["shop.Order"] || ns.Types["shop.User"].Indexes[0] != u.Indexes[0] {
		t.Errorf("copy-on-write shares the wrong parts")
	}
	checkInvariants(t, ns)
	if s.WithIndexState("shop.User", "nope", protobasev1.IndexState_INDEX_STATE_READY, "") != s ||
		s.WithIndexState("shop.Nope", "name", protobasev1.IndexState_INDEX_STATE_READY, "") != s {
		t.Errorf("unknown type or index must return the state itself")
	}
}

func TestDescribe(t *testing.T) {
	got := prototext.Format(&protobasev1.GetSchemaResponse{Types: sampleState(t).Describe()})
	want := &protobasev1.GetSchemaResponse{}
	if err := prototext.Unmarshal([]byte(`
types:{name:"shop.Event" primary_key:"at.seconds" primary_key:"at.nanos"}
types:{name:"shop.Order" primary_key:"id" indexes:{name:"user" fields:"user" state:INDEX_STATE_READY}}
types:{name:"shop.User" primary_key:"id"
  indexes:{name:"name" fields:"name" state:INDEX_STATE_READY}
  indexes:{name:"city_age" fields:"address.city" fields:"age" unique:true state:INDEX_STATE_FAILED error:"duplicate key (\"Paris\", 3)"}}
`), want); err != nil {
		t.Fatal(err)
	}
	if got != prototext.Format(want) {
		t.Errorf("Describe:\n%s\nwant:\n%s", got, prototext.Format(want))
	}
	if len(Empty().Describe()) != 0 {
		t.Errorf("empty state describes types")
	}
}

func TestFileDescriptorSet(t *testing.T) {
	s := sampleState(t)
	set := s.FileDescriptorSet()
	seen := map[string]bool{}
	for _, f := range set.File {
		for _, dep := range f.Dependency {
			if !seen[dep] {
				t.Errorf("%s listed before its import %s", f.GetName(), dep)
			}
		}
		if seen[f.GetName()] {
			t.Errorf("%s listed twice", f.GetName())
		}
		seen[f.GetName()] = true
	}
	for _, want := range []string{"users.proto", "orders.proto", "events.proto", "google/protobuf/timestamp.proto"} {
		if !seen[want] {
			t.Errorf("set lacks %s", want)
		}
	}
	// Imported for options only: not needed to decode a record.
	for _, unwanted := range []string{OptionsPath, "google/protobuf/descriptor.proto"} {
		if seen[unwanted] {
			t.Errorf("set holds %s", unwanted)
		}
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("set does not link: %v", err)
	}
	if _, err := files.FindDescriptorByName("shop.User"); err != nil {
		t.Error(err)
	}
	if _, err := s.Compiled.Registry.FindDescriptorByName("google.protobuf.Timestamp"); err != nil {
		t.Errorf("registry: %v", err)
	}
	if n := len(Empty().FileDescriptorSet().File); n != 0 {
		t.Errorf("empty state has %d files", n)
	}
}
