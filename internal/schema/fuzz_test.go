package schema

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// FuzzCompile compiles arbitrary source as one file: Compile never panics and
// returns a value or a *CompileError; a schema that compiles plans from the
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
			if !errors.As(err, &ce) || len(ce.Errors) == 0 || c != nil {
				t.Fatalf("Compile = %v, %v; want nil and a non-empty *CompileError", c, err)
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
