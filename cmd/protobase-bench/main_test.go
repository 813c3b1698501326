package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/exitstatus"
)

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command line and returns what it printed.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// mustCLI runs the command line and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) result {
	t.Helper()
	r := cli(t, args...)
	if r.code != exitstatus.OK {
		t.Fatalf("protobase-bench %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// wantCode fails the test unless r exited with code.
func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// wantContains fails the test unless s holds every one of subs.
func wantContains(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("output lacks %q:\n%s", sub, s)
		}
	}
}

// Without arguments the command lists every experiment and "all"; the
// flags that reach a running server are protobase's own.
func TestHelpListsExperiments(t *testing.T) {
	r := mustCLI(t)
	wantContains(t, r.stdout, "protobase-bench", "all", "batching", "fetch", "ingest", "layout", "oneop", "patterns", "transports", "watch",
		"--addr", "--api-key", "--tls-ca", "--tls-client-cert", "--quick", "--store")
}

// --version says which build this is, as protobase --version does.
func TestVersionFlag(t *testing.T) {
	r := mustCLI(t, "--version")
	if !strings.HasPrefix(r.stdout, "protobase-bench dev (") {
		t.Errorf("--version printed %q", r.stdout)
	}
}
