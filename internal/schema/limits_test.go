package schema

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// nestedOption is a file whose option value nests n message literals
// ("{a:{a:{a:..."), the shape that grew the server to 7 GB.
func nestedOption(n int) string {
	return "syntax = \"proto2\";\nimport \"google/protobuf/descriptor.proto\";\n" +
		"extend google.protobuf.MessageOptions { optional M m = 50000; }\n" +
		"message M { optional M a = 1; }\n" +
		"message X { option (m) = " + strings.Repeat("{a:", n) + "{}" + strings.Repeat("}", n) + "; }\n"
}

func nestedMessages(n int) string {
	return "syntax = \"proto3\";\n" + strings.Repeat("message M {\n", n) + strings.Repeat("}\n", n)
}

func TestCheckLimits(t *testing.T) {
	d := DefaultLimits
	tests := []struct {
		name      string
		files     map[string]string
		wantLimit string // "" = within the limits
		wantLine  int
	}{
		{"usual schema", map[string]string{"users.proto": usersProto, "orders.proto": orderFile}, "", 0},
		{"literal at the limit", map[string]string{"a.proto": nestedOption(d.MaxLiteralNesting - 1)}, "", 0},
		{"literal over the limit", map[string]string{"a.proto": nestedOption(d.MaxLiteralNesting)}, LimitLiteralNesting, 5},
		{"list literal", map[string]string{"a.proto": "message X { option (m) = " + strings.Repeat("{a:[", 20) + "}"}, LimitLiteralNesting, 1},
		{"angle literal", map[string]string{"a.proto": "message X { option (m) = {" + strings.Repeat("a <", 40) + "}"}, LimitLiteralNesting, 1},
		{"field option literal", map[string]string{"a.proto": "message X { int32 a = 1 [(m) = " + strings.Repeat("{a:", 40) + "]; }"}, LimitLiteralNesting, 1},
		{"messages at the limit", map[string]string{"a.proto": nestedMessages(d.MaxMessageNesting)}, "", 0},
		{"messages over the limit", map[string]string{"a.proto": nestedMessages(d.MaxMessageNesting + 1)}, LimitMessageNesting, 34},
		{"groups count as messages", map[string]string{"a.proto": strings.Repeat("message M { optional group G = 1 {\n", 17)}, LimitMessageNesting, 17},
		{"blocks", map[string]string{"a.proto": strings.Repeat("service S {", 70)}, LimitNesting, 1},
		{"parentheses", map[string]string{"a.proto": strings.Repeat("(", 65)}, LimitNesting, 1},
		{"brackets in strings and comments do not count", map[string]string{"a.proto": "// " + strings.Repeat("{", 100) + "\n/* " + strings.Repeat("{", 100) + " */\n" +
			"message X { option (m) = { s: \"" + strings.Repeat("{", 100) + "\\\"{\" t: '" + strings.Repeat("[", 100) + "' }; }\n"}, "", 0},
		{"unbalanced closers do not go negative", map[string]string{"a.proto": strings.Repeat("}", 100) + strings.Repeat("{", 60)}, "", 0},
		{"file name not UTF-8", map[string]string{"\xff.proto": strings.Repeat("(", 65)}, LimitNesting, 1},
		{"too many files", manyFiles(d.MaxFiles + 1), LimitFiles, 0},
		{"too many bytes", map[string]string{"a.proto": strings.Repeat(" ", d.MaxSourceBytes)}, LimitSourceBytes, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckLimits(tt.files, Limits{})
			if tt.wantLimit == "" {
				if err != nil {
					t.Fatalf("CheckLimits = %v, want nil", err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != tt.wantLimit || le.Line != tt.wantLine {
				t.Fatalf("CheckLimits = %v (%#v), want limit %s at line %d", err, le, tt.wantLimit, tt.wantLine)
			}
			if !strings.Contains(err.Error(), tt.wantLimit) || !utf8.ValidString(err.Error()) {
				t.Errorf("message %q does not name the limit, or is not UTF-8", err)
			}
		})
	}
}

func manyFiles(n int) map[string]string {
	out := make(map[string]string, n)
	for i := range n {
		out[fmt.Sprintf("f%d.proto", i)] = ""
	}
	return out
}

// TestCompileHostileNesting sends a 1.9 MB nested option literal, the shape
// that grew the server to 7 GB at 2.9 MB (within the byte limit, so that the
// nesting limit is what refuses it): Compile refuses it naming the limit,
// and allocates a small bounded amount doing so.
func TestCompileHostileNesting(t *testing.T) {
	src := nestedOption(1900000 / 4)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Compile(context.Background(), map[string]string{"hostile.proto": src})
	runtime.ReadMemStats(&after)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitLiteralNesting {
		t.Fatalf("Compile = %.200v, want a *LimitError for %s", err, LimitLiteralNesting)
	}
	const bound = 64 << 20
	if got := after.TotalAlloc - before.TotalAlloc; got > bound {
		t.Fatalf("refusing %d bytes allocated %d MB, want under %d MB", len(src), got>>20, bound>>20)
	}
}
