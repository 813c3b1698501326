package server_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	ts.MustApply(map[string]string{"shop.proto": shopProto})

	many := map[string]string{}
	for i := range 10001 {
		many["f"+strconv.Itoa(i)+".proto"] = ""
	}
	tests := []struct {
		name  string
		files map[string]string
		limit string
		field string // of the BadRequest violation
	}{
		{"nested option literal, 1.9 MB", map[string]string{"x.proto": hostileOption(1900000 / 4)}, "max_literal_nesting", "x.proto"},
		{"nested option literal, 2.9 MB", map[string]string{"x.proto": hostileOption(2900000 / 4)}, "max_source_bytes", "files"},
		{"nested messages", map[string]string{"x.proto": strings.Repeat("message M {", 100000)}, "max_message_nesting", "x.proto"},
		{"nested blocks", map[string]string{"x.proto": strings.Repeat("service S {", 100000)}, "max_nesting", "x.proto"},
		{"too many files", many, "max_files", "files"},
	}
	// The client and server share the process: the bound covers both, the
	// request's copies in gRPC included.
	const allocBound = 128 << 20
	var before, after runtime.MemStats
	for _, tt := range tests {
		for _, dry := range []bool{true, false} {
			runtime.ReadMemStats(&before)
			_, err := ts.Apply(tt.files, client.SchemaOptions{DryRun: dry})
			runtime.ReadMemStats(&after)
			wantCode(t, err, codes.InvalidArgument, tt.limit)
			if f := violationField(err); f != tt.field {
				t.Errorf("%s: violation field %q, want %q", tt.name, f, tt.field)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > allocBound {
				t.Fatalf("%s (dry run %v): %d MB allocated, want under %d MB", tt.name, dry, got>>20, allocBound>>20)
			}
		}
	}
	// Nothing changed, and the server still answers.
	if got := ts.MustApply(map[string]string{"shop.proto": shopProto}); got.Applied {
		t.Fatalf("the schema changed: %v", got)
	}
}

// violationField is the field of the first BadRequest violation of err.
func violationField(err error) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
			return br.FieldViolations[0].Field
		}
	}
	return ""
}
