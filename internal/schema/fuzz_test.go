package schema

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// FuzzCompile compiles arbitrary source as one file: Compile never panics and
// returns a value, a *CompileError or a *LimitError; a schema that compiles plans from the
// empty state and survives an Encode/Decode round trip unchanged.
func FuzzCompile(f *testing.F) {
	f.Add(usersProto)
	f.Add(baseUser()["users.proto"])
	f.Add(orderFile)
	f.Add("")
	f.Add("syntax = \"proto2\";\nmessage M { optional group G = 1 { optional int32 a = 2; } }\n")
	f.Fuzz(func(t *testing.T, src string) {
		// The fuzzer has no time limit per input: a hang in the compiler
		// would only show as a stalled run. Crash instead, with the input.
		tm := time.AfterFunc(20*time.Second, func() { panic(fmt.Sprintf("Compile took over 20s on %q", src)) })
		defer tm.Stop()
		ctx := context.Background()
		files := map[string]string{"fuzz.proto": src}
		c, err := Compile(ctx, files)
		if err != nil {
			var ce *CompileError
			var le *LimitError
			if (!errors.As(err, &ce) || len(ce.Errors) == 0) && !errors.As(err, &le) || c != nil {
				t.Fatalf("Compile = %v, %v; want nil and a non-empty *CompileError or a *LimitError", c, err)
			}
			return
		}
		r, err := Plan(ctx, nil, PlanRequest{Files: files}, nil)
		if err != nil {
			t.Fatalf("Plan from empty: %v", err)
		}
		b, err := r.State.Encode()
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		d, err := Decode(ctx, b)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		b2, err := d.Encode()
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("round trip: %v\n%s\n%s", err, b, b2)
		}
		_ = d.Describe()
		_ = d.FileDescriptorSet()
		if len(d.Types) != len(c.Types) {
			t.Fatalf("%d types after round trip, %d compiled", len(d.Types), len(c.Types))
		}
	})
}

// FuzzApplySchema plans a schema of two files (a.proto, b.proto), then a
// second version of them over the first, with records in every type, as
// ApplySchema does. Sources over DefaultLimits are refused with a
// *LimitError before any is parsed; every other outcome is a value or a
// *CompileError or *PlanError; a refused transition names a type; an
// accepted one lists every type whose declaration changed.
func FuzzApplySchema(f *testing.F) {
	f.Add(usersProto, "", usersProto, "")
	f.Add(nestedOption(DefaultLimits.MaxLiteralNesting), "", "", "")
	f.Add(nestedMessages(DefaultLimits.MaxMessageNesting), "", nestedMessages(DefaultLimits.MaxMessageNesting+1), "")
	f.Fuzz(func(t *testing.T, a1, b1, a2, b2 string) {
		tm := time.AfterFunc(20*time.Second, func() { panic(fmt.Sprintf("ApplySchema took over 20s on %q %q %q %q", a1, b1, a2, b2)) })
		defer tm.Stop()
		ctx := context.Background()
		first := map[string]string{"a.proto": a1, "b.proto": b1}
		r1, err := Plan(ctx, nil, PlanRequest{Files: first}, nil)
		checkPlanError(t, first, r1, err)
		if err != nil {
			return
		}
		second := map[string]string{"a.proto": a2, "b.proto": b2}
		all := func(*RecordType) (uint64, error) { return 1, nil }
		r2, err := Plan(ctx, r1.State, PlanRequest{Files: second}, all)
		checkPlanError(t, second, r2, err)
		var pe *PlanError
		if errors.As(err, &pe) {
			for _, p := range pe.Problems {
				if !strings.HasPrefix(p, "type ") {
					t.Fatalf("problem %q names no type", p)
				}
			}
		}
	})
}

// checkPlanError checks the outcome of Plan on files.
func checkPlanError(t *testing.T, files map[string]string, r *Result, err error) {
	t.Helper()
	limitErr := CheckLimits(files, DefaultLimits)
	var le *LimitError
	var ce *CompileError
	var pe *PlanError
	switch {
	case limitErr != nil:
		var want *LimitError
		if !errors.As(limitErr, &want) || !errors.As(err, &le) || le.Limit != want.Limit {
			t.Fatalf("sources over a limit (%v): Plan = %v", limitErr, err)
		}
	case err == nil:
		if r == nil || r.State == nil {
			t.Fatal("Plan returned no result")
		}
	case errors.As(err, &ce):
		if len(ce.Errors) == 0 {
			t.Fatal("empty *CompileError")
		}
	case errors.As(err, &pe):
		if len(pe.Problems) == 0 {
			t.Fatal("empty *PlanError")
		}
	default:
		t.Fatalf("Plan = %T %v", err, err)
	}
}
