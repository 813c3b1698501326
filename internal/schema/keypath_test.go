package schema

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A key path through a recursive message is bounded by MaxKeyPathDepth:
// one 200 fields deep names a key no record can set (decoders stop at 100
// levels of nesting).
func TestKeyPathDepth(t *testing.T) {
	src := func(pk, ix int) map[string]string {
		path := func(n int) string { return strings.TrimSuffix(strings.Repeat("n.", n-1)+"id", ".") }
		return map[string]string{"t.proto": record("message T {\n  option (protobase.v1.record) = { primary_key: \"" + path(pk) +
			"\" index: { name: \"deep\" fields: \"" + path(ix) + "\" } };\n  int64 id = 1;\n  T n = 2;\n}\n")}
	}
	for _, tc := range []struct{ pk, ix int }{{MaxKeyPathDepth, 1}, {1, MaxKeyPathDepth}} {
		if _, err := Compile(context.Background(), src(tc.pk, tc.ix)); err != nil {
			t.Fatalf("key path of %d fields, index path of %d: %v", tc.pk, tc.ix, err)
		}
	}
	for _, tc := range []struct{ pk, ix int }{{200, 1}, {1, MaxKeyPathDepth + 1}} {
		_, err := Compile(context.Background(), src(tc.pk, tc.ix))
		var ce *CompileError
		if !errors.As(err, &ce) || len(ce.Errors) != 1 || !strings.Contains(ce.Errors[0], LimitKeyPathDepth) {
			t.Fatalf("key path of %d fields, index path of %d: %v", tc.pk, tc.ix, err)
		}
	}
}
