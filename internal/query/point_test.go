package query

import (
	"bytes"
	"context"
	"math"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/record"
	"github.com/protobase/protobase/internal/schema"
)

// pointProto has one record type per primary-key kind.
const pointProto = `syntax = "proto3";
package pt;
import "protobase/v1/options.proto";
enum E { E_ZERO = 0; E_ONE = 1; }
message I32 { option (protobase.v1.record) = { primary_key: "k" }; int32 k = 1; string v = 2; }
message I64 { option (protobase.v1.record) = { primary_key: "k" index: { fields: "v" } }; sint64 k = 1; string v = 2; }
message U32 { option (protobase.v1.record) = { primary_key: "k" }; fixed32 k = 1; }
message U64 { option (protobase.v1.record) = { primary_key: "k" }; uint64 k = 1; }
message S { option (protobase.v1.record) = { primary_key: "k" }; string k = 1; }
message B { option (protobase.v1.record) = { primary_key: "k" }; bytes k = 1; }
message Bo { option (protobase.v1.record) = { primary_key: "k" }; bool k = 1; }
message En { option (protobase.v1.record) = { primary_key: "k" }; E k = 1; }
message D { option (protobase.v1.record) = { primary_key: "k" }; double k = 1; }
message Two { option (protobase.v1.record) = { primary_key: ["a", "b"] }; int64 a = 1; int64 b = 2; }
message N { option (protobase.v1.record) = { primary_key: "m.k" }; M m = 1; }
message M { int64 k = 1; }
`

// TestPointAgreesWithCompile checks the fast path against the planner: for
// every query it accepts, Compile must plan one pk_point range with no
// filter starting at exactly the same key; types it refuses have no Point.
func TestPointAgreesWithCompile(t *testing.T) {
	res, err := schema.Plan(context.Background(), schema.Empty(), schema.PlanRequest{Files: map[string]string{"pt.proto": pointProto}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := func(name string) *Target {
		rt := res.State.Types[schemaName(name)]
		rec, err := record.Compile(rt.Desc)
		if err != nil {
			t.Fatal(err)
		}
		return &Target{Rec: rec, Type: rt, Indexes: rt.Indexes}
	}
	for _, name := range []string{"pt.En", "pt.D", "pt.Two"} {
		if NewPoint(target(name)) != nil {
			t.Errorf("%s: fast path offered for a key it does not encode", name)
		}
	}

	values := []*pb.Value{
		vi(0), vi(-1), vi(42), vi(math.MaxInt32), vi(math.MaxInt32 + 1), vi(math.MinInt64),
		vu(0), vu(7), vu(math.MaxUint32), vu(math.MaxUint32 + 1), vu(math.MaxUint64),
		vb(true), vb(false), vs(""), vs("a\x00b"), vs("héllo"), vby(nil), vby([]byte{0, 0xff}),
		vd(1), venum("E_ONE"), {},
	}
	shapes := []func(field string, v *pb.Value) *pb.Query{
		func(f string, v *pb.Value) *pb.Query { return &pb.Query{Where: eq(f, v)} },
		func(f string, v *pb.Value) *pb.Query { return &pb.Query{Where: eq(f, v), Limit: 1, KeysOnly: true} },
		func(f string, v *pb.Value) *pb.Query { return &pb.Query{Where: eq(f, v), Count: true} },
		func(f string, v *pb.Value) *pb.Query {
			return &pb.Query{Where: eq(f, v), Order: &pb.Order{Descending: true}}
		},
		// Declined shapes: they must fall through to Compile.
		func(f string, v *pb.Value) *pb.Query { return &pb.Query{Where: eq(f, v), Explain: true} },
		func(f string, v *pb.Value) *pb.Query {
			return &pb.Query{Where: eq(f, v), Order: &pb.Order{Index: "I64_v"}}
		},
		func(f string, v *pb.Value) *pb.Query { return &pb.Query{Where: ge(f, v)} },
		func(f string, v *pb.Value) *pb.Query { return &pb.Query{Where: in(f, v)} },
		func(f string, v *pb.Value) *pb.Query { return &pb.Query{Where: and(eq(f, v), eq(f, v))} },
		func(f string, v *pb.Value) *pb.Query { return &pb.Query{Where: eq("v", v)} },
		func(string, *pb.Value) *pb.Query { return &pb.Query{} },
	}
	accepted := 0
	for _, name := range []string{"pt.I32", "pt.I64", "pt.U32", "pt.U64", "pt.S", "pt.B", "pt.Bo", "pt.N"} {
		tg := target(name)
		p := NewPoint(tg)
		if p == nil {
			t.Fatalf("%s: no fast path", name)
		}
		field := tg.Type.PrimaryKey[0].Path
		for si, shape := range shapes {
			for _, v := range values {
				q := shape(field, v)
				q.Type = name
				prefix := []byte("keep")
				key, ok := p.Key(prefix, q)
				if !bytes.HasPrefix(key, prefix) {
					t.Fatalf("%s shape %d %v: dst overwritten", name, si, v)
				}
				if !ok {
					if !bytes.Equal(key, prefix) {
						t.Errorf("%s shape %d %v: declined but dst changed", name, si, v)
					}
					continue
				}
				accepted++
				plan, err := Compile(q, tg, Limits{})
				if err != nil {
					t.Errorf("%s shape %d %v: fast path accepted what Compile refuses: %v", name, si, v, err)
					continue
				}
				if plan.Access != AccessPKPoint || len(plan.Ranges) != 1 || plan.Filter != nil {
					t.Errorf("%s shape %d %v: Compile plans %s, fast path assumed one exact point", name, si, v, plan.Explain().GetText())
					continue
				}
				if !bytes.Equal(key[len(prefix):], plan.Ranges[0].Start) {
					t.Errorf("%s shape %d %v: key %x, Compile %x", name, si, v, key[len(prefix):], plan.Ranges[0].Start)
				}
			}
		}
	}
	if accepted < 50 {
		t.Fatalf("fast path accepted only %d queries: the test exercises too little", accepted)
	}
}

func schemaName(s string) protoreflect.FullName { return protoreflect.FullName(s) }
