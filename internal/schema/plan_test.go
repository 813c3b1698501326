package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protoreflect"

	protobasev1 "github.com/protobase/protobase/gen/protobase/v1"
)

// userFile is users.proto with shop.User: option is the record option body,
// fields the User fields after "int64 id = 1;", extra more declarations.
func userFile(option, fields, extra string) map[string]string {
	body := "message User {\n"
	if option != "" {
		body += "  option (protobase.v1.record) = { " + option + " };\n"
	}
	body += "  int64 id = 1;\n" + fields + "}\n" + extra
	return map[string]string{"users.proto": record(body)}
}

const (
	baseFields  = "  string name = 2;\n  int32 age = 3;\n  Address address = 4;\n"
	baseAddress = "message Address { string city = 1; string zip = 2; }\n"
)

func baseUser() map[string]string { return userFile(`primary_key: "id"`, baseFields, baseAddress) }

func withFiles(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

const orderFile = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";
message Order {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "user" } };
  string id = 1;
  int64 user = 2;
}
`

// step is one ApplySchema in a scenario.
type step struct {
	files     map[string]string
	allowDrop []string
	counts    map[protoreflect.FullName]uint64 // records per type of the old state
	// wantErr is a substring of every expected problem ("" = success);
	// wantReason the PlanError reason.
	wantErr    []string
	wantReason string
	// wantPlan is the expected plan in prototext (checked when set).
	wantPlan string
	check    func(t *testing.T, old *State, r *Result)
	// markIndex, applied after the step: "Type.index=STATE:msg".
	markIndex [][4]string
}

func TestPlan(t *testing.T) {
	ready := protobasev1.IndexState_INDEX_STATE_READY
	building := protobasev1.IndexState_INDEX_STATE_BUILDING
	withData := map[protoreflect.FullName]uint64{"shop.User": 10, "shop.Order": 3}

	tests := []struct {
		name  string
		steps []step
	}{{
		name: "add type",
		steps: []step{{
			files:    baseUser(),
			wantPlan: `types_added:"shop.User" files_added:"users.proto"`,
			check: func(t *testing.T, old *State, r *Result) {
				if !r.Changed || r.State.Version != 1 || r.State.Types["shop.User"].ID != 1 || r.State.ByID[1].Name != "shop.User" || r.State.NextTypeID != 2 {
					t.Errorf("state: %+v", r.State)
				}
			},
		}},
	}, {
		name: "add field to a type with data",
		steps: []step{{files: baseUser()}, {
			files:    userFile(`primary_key: "id"`, baseFields+"  string email = 5;\n", baseAddress),
			counts:   withData,
			wantPlan: `types_changed:{type:"shop.User" changes:"field email (5) added"} files_changed:"users.proto"`,
			check: func(t *testing.T, old *State, r *Result) {
				if r.State.Version != 2 || r.State.Types["shop.User"].ID != 1 {
					t.Errorf("version %d id %d", r.State.Version, r.State.Types["shop.User"].ID)
				}
			},
		}},
	}, {
		name: "change field type with data refused",
		steps: []step{{files: baseUser()}, {
			files:      userFile(`primary_key: "id"`, "  string name = 2;\n  string age = 3;\n  Address address = 4;\n", baseAddress),
			counts:     withData,
			wantReason: ReasonIncompatible,
			wantErr:    []string{"type shop.User (10 records): field age (3) changed from int32 to string"},
		}},
	}, {
		name: "reuse of a field number for another type with data refused",
		steps: []step{{files: baseUser()}, {
			files:      userFile(`primary_key: "id"`, "  string name = 2;\n  repeated int32 ages = 3;\n  Address address = 4;\n", baseAddress),
			counts:     withData,
			wantReason: ReasonIncompatible,
			wantErr:    []string{"type shop.User (10 records): field age (3) changed from int32 to repeated int32"},
		}},
	}, {
		name: "field number change with data refused",
		steps: []step{{files: baseUser()}, {
			files:      userFile(`primary_key: "id"`, "  string name = 2;\n  int32 age = 6;\n  Address address = 4;\n  reserved 3;\n", baseAddress),
			counts:     withData,
			wantReason: ReasonIncompatible,
			wantErr:    []string{"type shop.User (10 records): field age: number changed from 3 to 6"},
		}},
	}, {
		name: "same changes without data",
		steps: []step{{files: baseUser()}, {
			files:    userFile(`primary_key: "name"`, "  string name = 2;\n  string age = 3;\n  int64 address = 6;\n", "message Address { int64 zip = 2; }\n"),
			counts:   map[protoreflect.FullName]uint64{"shop.User": 0},
			wantPlan: `types_changed:{type:"shop.User" changes:"field age (3) changed from int32 to string" changes:"field address: number changed from 4 to 6" changes:"primary key changed from [id] to [name]"} files_changed:"users.proto"`,
		}},
	}, {
		name: "remove field with data refused unless reserved",
		steps: []step{{files: baseUser()}, {
			files:      userFile(`primary_key: "id"`, "  string name = 2;\n  Address address = 4;\n", baseAddress),
			counts:     withData,
			wantReason: ReasonIncompatible,
			wantErr:    []string{`type shop.User (10 records): field age (3) removed (to remove a field of stored records, reserve its number: "reserved 3;")`},
		}, {
			files:    userFile(`primary_key: "id"`, "  string name = 2;\n  Address address = 4;\n", baseAddress),
			counts:   map[protoreflect.FullName]uint64{"shop.User": 0},
			wantPlan: `types_changed:{type:"shop.User" changes:"field age (3) removed"} files_changed:"users.proto"`,
		}, {
			files:    userFile(`primary_key: "id"`, "  string name = 2;\n  Address address = 4;\n  reserved 3;\n", baseAddress),
			counts:   withData,
			wantPlan: `files_changed:"users.proto"`,
		}},
	}, {
		name: "remove field with data allowed when reserved",
		steps: []step{{files: baseUser()}, {
			files:    userFile(`primary_key: "id"`, "  string name = 2;\n  Address address = 4;\n  reserved 3;\n", baseAddress),
			counts:   withData,
			wantPlan: `types_changed:{type:"shop.User" changes:"field age (3) removed (number reserved)"} files_changed:"users.proto"`,
		}},
	}, {
		name: "rename keeps the field",
		steps: []step{{files: baseUser()}, {
			files:    userFile(`primary_key: "id"`, "  string full_name = 2;\n  int32 age = 3;\n  Address address = 4;\n", baseAddress),
			counts:   withData,
			wantPlan: `types_changed:{type:"shop.User" changes:"field name (2) renamed to full_name"} files_changed:"users.proto"`,
		}},
	}, {
		name: "renaming key and index fields keeps keys and indexes",
		steps: []step{{files: userFile(`primary_key: "id" index: { fields: ["address.city", "name"] }`, baseFields, baseAddress)}, {
			files: map[string]string{"users.proto": record(`message User {
  option (protobase.v1.record) = { primary_key: "user_id" index: { fields: ["address.town", "full_name"] name: "address_city_name" } };
  int64 user_id = 1;
  string full_name = 2;
  int32 age = 3;
  Address address = 4;
}
message Address { string town = 1; string zip = 2; }
`)},
			counts: withData,
			wantPlan: `types_changed:{type:"shop.User" changes:"field id (1) renamed to user_id" changes:"field name (2) renamed to full_name"` +
				` changes:"message shop.Address: field city (1) renamed to town" changes:"primary key renamed from [id] to [user_id]"` +
				` changes:"index address_city_name fields renamed from [address.city, name] to [address.town, full_name]"} files_changed:"users.proto"`,
			check: func(t *testing.T, old *State, r *Result) {
				if ix := r.State.Types["shop.User"].Indexes[0]; ix.ID != 1 || ix.State != ready || keyPaths(ix.Fields)[0] != "address.town" {
					t.Errorf("index %+v", ix)
				}
			},
		}},
	}, {
		name: "primary key change with data refused",
		steps: []step{{files: baseUser()}, {
			files:      userFile(`primary_key: ["id", "name"]`, baseFields, baseAddress),
			counts:     withData,
			wantReason: ReasonIncompatible,
			wantErr:    []string{"type shop.User (10 records): primary key changed from [id] to [id, name]"},
		}},
	}, {
		name: "nested message type change under a type with data refused",
		steps: []step{{files: baseUser()}, {
			files:      userFile(`primary_key: "id"`, baseFields, "message Address { string city = 1; int64 zip = 2; }\n"),
			counts:     withData,
			wantReason: ReasonIncompatible,
			wantErr:    []string{"type shop.User (10 records): message shop.Address: field zip (2) changed from string to int64"},
		}, {
			files:    userFile(`primary_key: "id"`, baseFields, "message Address { string city = 1; string zip = 2; int64 code = 3; }\n"),
			counts:   withData,
			wantPlan: `types_changed:{type:"shop.User" changes:"message shop.Address: field code (3) added"} files_changed:"users.proto"`,
		}},
	}, {
		name: "recursive and map message types",
		steps: []step{{
			files: userFile(`primary_key: "id"`, "  Node root = 2;\n  map<string, Node> named = 3;\n", "message Node { Node child = 1; repeated Node kids = 2; string v = 3; }\n"),
		}, {
			files:      userFile(`primary_key: "id"`, "  Node root = 2;\n  map<string, Node> named = 3;\n", "message Node { Node child = 1; repeated Node kids = 2; bytes v = 3; }\n"),
			counts:     withData,
			wantReason: ReasonIncompatible,
			wantErr:    []string{"message shop.Node: field v (3) changed from string to bytes"},
		}, {
			files:      userFile(`primary_key: "id"`, "  Node root = 2;\n  map<string, string> named = 3;\n", "message Node { Node child = 1; repeated Node kids = 2; string v = 3; }\n"),
			counts:     withData,
			wantReason: ReasonIncompatible,
			wantErr:    []string{"field named (3) changed from map<string, shop.Node> to map<string, string>"},
		}},
	}, {
		name: "drop without allow_drop refused",
		steps: []step{{files: withFiles(baseUser(), map[string]string{"orders.proto": orderFile})}, {
			files:      userFile("", baseFields, baseAddress),
			counts:     withData,
			allowDrop:  []string{"shop.Nope"},
			wantReason: ReasonDropNotAllowed,
			wantErr: []string{
				"type shop.Order: would be dropped with its 3 records",
				"type shop.User: would be dropped with its 10 records",
			},
		}},
	}, {
		name: "drop with allow_drop listed with count",
		steps: []step{{files: withFiles(baseUser(), map[string]string{"orders.proto": orderFile})}, {
			files:     baseUser(),
			counts:    withData,
			allowDrop: []string{"shop.Order", "shop.User", "unknown.Type"},
			wantPlan:  `types_dropped:{type:"shop.Order" records:3} indexes_dropped:{type:"shop.Order" index:"user" fields:"user"} files_removed:"orders.proto"`,
			check: func(t *testing.T, old *State, r *Result) {
				if len(r.DroppedTypes) != 1 || r.DroppedTypes[0] != old.Types["shop.Order"] {
					t.Errorf("dropped types %v", r.DroppedTypes)
				}
				if len(r.DroppedIndexes) != 1 || r.DroppedIndexes[0] != old.Types["shop.Order"].Indexes[0] {
					t.Errorf("dropped indexes %v", r.DroppedIndexes)
				}
				if _, ok := r.State.Types["shop.Order"]; ok || len(r.State.Types) != 1 || r.State.ByID[1] != nil {
					t.Errorf("types after drop: %v", r.State.Types)
				}
			},
		}},
	}, {
		name: "add index to a type with data builds it",
		steps: []step{{files: baseUser()}, {
			files:    userFile(`primary_key: "id" index: { fields: "name" }`, baseFields, baseAddress),
			counts:   withData,
			wantPlan: `types_changed:{type:"shop.User" changes:"index name added"} indexes_added:{type:"shop.User" index:"name" fields:"name" build_required:true} files_changed:"users.proto"`,
			check: func(t *testing.T, old *State, r *Result) {
				ix, _ := r.State.Types["shop.User"].Index("name")
				if ix.State != building || ix.ID != 1 || len(r.BuildIndexes) != 1 || r.BuildIndexes[0] != ix {
					t.Errorf("index %+v, build %v", ix, r.BuildIndexes)
				}
			},
		}},
	}, {
		name: "add index to an empty type is ready",
		steps: []step{{files: baseUser()}, {
			files:    userFile(`primary_key: "id" index: { fields: "address.city" unique: true }`, baseFields, baseAddress),
			counts:   map[protoreflect.FullName]uint64{"shop.User": 0},
			wantPlan: `types_changed:{type:"shop.User" changes:"index address_city added"} indexes_added:{type:"shop.User" index:"address_city" fields:"address.city" unique:true} files_changed:"users.proto"`,
			check: func(t *testing.T, old *State, r *Result) {
				if ix, _ := r.State.Types["shop.User"].Index("address_city"); ix.State != ready || len(r.BuildIndexes) != 0 {
					t.Errorf("index %+v, build %v", ix, r.BuildIndexes)
				}
			},
		}},
	}, {
		name: "index redefinition is drop and add",
		steps: []step{{files: userFile(`primary_key: "id" index: { fields: "name" } index: { fields: "age" }`, baseFields, baseAddress)}, {
			files:    userFile(`primary_key: "id" index: { fields: "name" unique: true } index: { fields: "age" }`, baseFields, baseAddress),
			counts:   withData,
			wantPlan: `types_changed:{type:"shop.User" changes:"index name redefined"} indexes_added:{type:"shop.User" index:"name" fields:"name" unique:true build_required:true} indexes_dropped:{type:"shop.User" index:"name" fields:"name"} files_changed:"users.proto"`,
			check: func(t *testing.T, old *State, r *Result) {
				nt := r.State.Types["shop.User"]
				if nt.Indexes[0].ID != 3 || nt.Indexes[1].ID != 2 || nt.Indexes[1] == old.Types["shop.User"].Indexes[1] && nt.Indexes[1].State != ready {
					t.Errorf("index ids %d %d", nt.Indexes[0].ID, nt.Indexes[1].ID)
				}
				if len(r.DroppedIndexes) != 1 || r.DroppedIndexes[0].ID != 1 {
					t.Errorf("dropped %v", r.DroppedIndexes)
				}
			},
		}, {
			files:      userFile(`primary_key: "id" index: { fields: "name" unique: true }`, baseFields, baseAddress),
			counts:     withData,
			allowDrop:  []string{"shop.User", "age", "shop.User.name"},
			wantReason: ReasonDropNotAllowed,
			wantErr:    []string{"index shop.User.age: would be dropped (the type no longer declares it); name it in allow_drop"},
		}, {
			files:     userFile(`primary_key: "id" index: { fields: "name" unique: true }`, baseFields, baseAddress),
			counts:    withData,
			allowDrop: []string{"shop.User.age"},
			wantPlan:  `types_changed:{type:"shop.User" changes:"index age dropped"} indexes_dropped:{type:"shop.User" index:"age" fields:"age"} files_changed:"users.proto"`,
		}},
	}, {
		name: "an index left out of an empty type is refused too",
		steps: []step{{files: userFile(`primary_key: "id" index: { fields: "name" unique: true }`, baseFields, baseAddress)}, {
			files:      baseUser(),
			wantReason: ReasonDropNotAllowed,
			wantErr:    []string{"index shop.User.name: would be dropped"},
		}, {
			files:     baseUser(),
			allowDrop: []string{"shop.User.name"},
			wantPlan:  `types_changed:{type:"shop.User" changes:"index name dropped"} indexes_dropped:{type:"shop.User" index:"name" fields:"name" unique:true} files_changed:"users.proto"`,
		}},
	}, {
		name: "a failed index is rebuilt on the next apply",
		steps: []step{{
			files:     userFile(`primary_key: "id" index: { fields: "name" unique: true }`, baseFields, baseAddress),
			markIndex: [][4]string{{"shop.User", "name", "INDEX_STATE_FAILED", "duplicate name \"x\""}},
		}, {
			files:    userFile(`primary_key: "id" index: { fields: "name" unique: true }`, baseFields, baseAddress),
			counts:   withData,
			wantPlan: `types_changed:{type:"shop.User" changes:"index name rebuilt (it had failed: duplicate name \"x\")"} indexes_added:{type:"shop.User" index:"name" fields:"name" unique:true build_required:true} indexes_dropped:{type:"shop.User" index:"name" fields:"name" unique:true}`,
			check: func(t *testing.T, old *State, r *Result) {
				if ix := r.State.Types["shop.User"].Indexes[0]; ix.ID != 2 || ix.State != building || ix.Error != "" || r.State.Version != 2 {
					t.Errorf("index %+v version %d", ix, r.State.Version)
				}
			},
		}},
	}, {
		name: "ids are stable and never reused",
		steps: []step{{
			files: withFiles(baseUser(), map[string]string{"orders.proto": orderFile}),
			check: func(t *testing.T, old *State, r *Result) {
				if r.State.Types["shop.Order"].ID != 1 || r.State.Types["shop.User"].ID != 2 || r.State.Types["shop.Order"].Indexes[0].ID != 1 {
					t.Errorf("ids: %+v", r.State.Types)
				}
			},
		}, {
			files:     baseUser(),
			allowDrop: []string{"shop.Order"},
		}, {
			files: withFiles(userFile(`primary_key: "id" index: { fields: "age" }`, baseFields, baseAddress), map[string]string{"orders.proto": orderFile}),
			check: func(t *testing.T, old *State, r *Result) {
				o, u := r.State.Types["shop.Order"], r.State.Types["shop.User"]
				if o.ID != 3 || u.ID != 2 || o.Indexes[0].ID != 2 || u.Indexes[0].ID != 3 || r.State.NextTypeID != 4 || r.State.NextIndexID != 4 {
					t.Errorf("ids: order %d/%d user %d/%d next %d/%d", o.ID, o.Indexes[0].ID, u.ID, u.Indexes[0].ID, r.State.NextTypeID, r.State.NextIndexID)
				}
				if r.State.ByID[3] != o || r.State.ByID[2] != u || len(r.State.ByID) != 2 {
					t.Errorf("ByID %v", r.State.ByID)
				}
			},
		}},
	}, {
		name: "no-op plan keeps the version and the state",
		steps: []step{{files: baseUser()}, {
			files:    baseUser(),
			counts:   withData,
			wantPlan: ``,
			check: func(t *testing.T, old *State, r *Result) {
				if r.Changed || r.State != old || r.State.Version != 1 {
					t.Errorf("changed %v version %d", r.Changed, r.State.Version)
				}
			},
		}},
	}, {
		name: "files removed and added, types moved between files",
		steps: []step{{files: baseUser()}, {
			files:    map[string]string{"v2/users.proto": baseUser()["users.proto"], "empty.proto": "syntax = \"proto3\";\n"},
			counts:   withData,
			wantPlan: `files_added:"empty.proto" files_added:"v2/users.proto" files_removed:"users.proto"`,
			check: func(t *testing.T, old *State, r *Result) {
				if r.State.Types["shop.User"].ID != 1 || r.State.Version != 2 {
					t.Errorf("state %+v", r.State)
				}
			},
		}},
	}, {
		name: "all problems reported",
		steps: []step{{files: withFiles(baseUser(), map[string]string{"orders.proto": orderFile})}, {
			files:      userFile(`primary_key: "id"`, "  bytes name = 2;\n  Address address = 4;\n", baseAddress),
			counts:     withData,
			wantReason: ReasonIncompatible,
			wantErr: []string{
				"type shop.Order: would be dropped",
				"type shop.User (10 records): field name (2) changed from string to bytes",
				"type shop.User (10 records): field age (3) removed",
			},
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Empty()
			for i, s := range tt.steps {
				var asked []protoreflect.FullName
				counts := func(rt *RecordType) (uint64, error) {
					if st.Types[rt.Name] != rt {
						t.Errorf("counts asked about %s, which is not of the old state", rt.Name)
					}
					asked = append(asked, rt.Name)
					return s.counts[rt.Name], nil
				}
				r, err := Plan(context.Background(), st, PlanRequest{Files: s.files, AllowDrop: s.allowDrop}, counts)
				if len(s.wantErr) > 0 {
					var pe *PlanError
					if !errors.As(err, &pe) {
						t.Fatalf("step %d: Plan = %v, want *PlanError", i, err)
					}
					if pe.Reason != s.wantReason || len(pe.Problems) != len(s.wantErr) {
						t.Fatalf("step %d: reason %s, problems:\n%s", i, pe.Reason, pe)
					}
					for j, want := range s.wantErr {
						if !strings.Contains(pe.Problems[j], want) {
							t.Errorf("step %d: problem %q, want %q", i, pe.Problems[j], want)
						}
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: Plan: %v", i, err)
				}
				if sorted := slices.Sorted(slices.Values(asked)); len(slices.Compact(sorted)) != len(asked) {
					t.Errorf("step %d: counts asked twice: %v", i, asked)
				}
				if s.wantPlan != "" || s.check == nil {
					want := new(protobasev1.SchemaPlan)
					if err := prototext.Unmarshal([]byte(s.wantPlan), want); err != nil {
						t.Fatalf("bad wantPlan: %v", err)
					}
					if s.wantPlan != "" && !equalPlans(r.Plan, want) {
						t.Errorf("step %d: plan\n got: %v\nwant: %v", i, r.Plan, want)
					}
				}
				if s.wantPlan == "" && s.check != nil && !r.Changed && !equalPlans(r.Plan, &protobasev1.SchemaPlan{}) {
					t.Errorf("step %d: no-op plan is not empty: %v", i, r.Plan)
				}
				if s.check != nil {
					s.check(t, st, r)
				}
				checkInvariants(t, r.State)
				st = r.State
				for _, m := range s.markIndex {
					st = st.WithIndexState(protoreflect.FullName(m[0]), m[1], protobasev1.IndexState(protobasev1.IndexState_value[m[2]]), m[3])
				}
			}
		})
	}
}

func equalPlans(a, b *protobasev1.SchemaPlan) bool {
	return prototext.Format(a) == prototext.Format(b)
}

// checkInvariants checks the documented invariants of a State.
func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	if len(s.Types) != len(s.ByID) || len(s.Types) != len(s.Compiled.Types) {
		t.Errorf("types %d, by id %d, compiled %d", len(s.Types), len(s.ByID), len(s.Compiled.Types))
	}
	indexIDs := map[uint32]bool{}
	for name, rt := range s.Types {
		if rt.Name != name || s.ByID[rt.ID] != rt || rt.ID == 0 || rt.ID >= s.NextTypeID {
			t.Errorf("type %s: id %d, next %d", name, rt.ID, s.NextTypeID)
		}
		if rt.Desc != s.Compiled.Types[name].Desc {
			t.Errorf("type %s: descriptor is not the compiled one", name)
		}
		for _, ix := range rt.Indexes {
			if ix.ID == 0 || ix.ID >= s.NextIndexID || indexIDs[ix.ID] || ix.Type != name || ix.State == protobasev1.IndexState_INDEX_STATE_UNSPECIFIED {
				t.Errorf("type %s: index %+v", name, ix)
			}
			indexIDs[ix.ID] = true
		}
	}
}

func TestPlanErrors(t *testing.T) {
	ctx := context.Background()
	// A compile error comes back as such.
	if _, err := Plan(ctx, nil, PlanRequest{Files: map[string]string{"a.proto": "nope"}}, nil); !errors.As(err, new(*CompileError)) {
		t.Errorf("Plan with bad source = %v", err)
	}
	// A counting error is returned, wrapped.
	r, err := Plan(ctx, nil, PlanRequest{Files: baseUser()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, err = Plan(ctx, r.State, PlanRequest{Files: userFile(`primary_key: "id" index: { fields: "name" }`, baseFields, baseAddress)},
		func(*RecordType) (uint64, error) { return 0, boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "shop.User") {
		t.Errorf("Plan with failing counts = %v", err)
	}
	// Counts is not asked when nothing depends on it.
	_, err = Plan(ctx, r.State, PlanRequest{Files: userFile(`primary_key: "id"`, baseFields+"  string email = 5;\n", baseAddress)},
		func(*RecordType) (uint64, error) { return 0, fmt.Errorf("should not be called") })
	if err != nil {
		t.Errorf("Plan asked for counts needlessly: %v", err)
	}
}
