package server_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server"
)

// hostileOption nests n option message literals ("{a:{a:{a:..."): at
// 2.9 MB this grew the server to 7 GB in the proto parser.
func hostileOption(n int) string {
	return "syntax = \"proto2\";\nimport \"google/protobuf/descriptor.proto\";\n" +
		"extend google.protobuf.MessageOptions { optional M m = 50000; }\n" +
		"message M { optional M a = 1; }\n" +
		"message X { option (m) = " + strings.Repeat("{a:", n) + "{}" + strings.Repeat("}", n) + "; }\n"
}

// TestApplySchemaHostileSources sends schemas over each schema limit, as
// dry runs and for real: each is INVALID_ARGUMENT naming the limit, the
// server's heap stays under a generous bound and it keeps answering.
func TestApplySchemaHostileSources(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.mustApply(map[string]string{"shop.proto": shopProto})

	many := map[string]string{}
	for i := range 10001 {
		many["f"+strconv.Itoa(i)+".proto"] = ""
	}
	tests := []struct {
		name  string
		files map[string]string
		limit string
	}{
		{"nested option literal, 1.9 MB", map[string]string{"x.proto": hostileOption(1900000 / 4)}, "max_literal_nesting"},
		{"nested option literal, 2.9 MB", map[string]string{"x.proto": hostileOption(2900000 / 4)}, "max_source_bytes"},
		{"nested messages", map[string]string{"x.proto": strings.Repeat("message M {", 100000)}, "max_message_nesting"},
		{"nested blocks", map[string]string{"x.proto": strings.Repeat("service S {", 100000)}, "max_nesting"},
		{"too many files", many, "max_files"},
	}
	// The client and server share the process: the bound covers both, the
	// request's copies in gRPC included.
	const allocBound = 128 << 20
	var before, after runtime.MemStats
	for _, tt := range tests {
		for _, dry := range []bool{true, false} {
			runtime.ReadMemStats(&before)
			_, err := ts.apply(tt.files, client.SchemaOptions{DryRun: dry})
			runtime.ReadMemStats(&after)
			wantCode(t, err, codes.InvalidArgument, tt.limit)
			if got := after.TotalAlloc - before.TotalAlloc; got > allocBound {
				t.Fatalf("%s (dry run %v): %d MB allocated, want under %d MB", tt.name, dry, got>>20, allocBound>>20)
			}
		}
	}
	// Nothing changed, and the server still answers.
	if got := ts.mustApply(map[string]string{"shop.proto": shopProto}); got.Applied {
		t.Fatalf("the schema changed: %v", got)
	}
}
