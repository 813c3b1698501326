package buildversion

import (
	"runtime"
	"strings"
	"testing"
)

// A stamped version is reported as given, with the toolchain and platform.
func TestString(t *testing.T) {
	s := String("v1.2.3")
	if !strings.HasPrefix(s, "v1.2.3 (") || !strings.HasSuffix(s, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+")") {
		t.Errorf("String(v1.2.3) = %q", s)
	}
	// A test binary is built from (devel): without a stamp it is "dev".
	if s := String(""); !strings.HasPrefix(s, "dev (") {
		t.Errorf(`String("") = %q, want "dev (..."`, s)
	}
}
