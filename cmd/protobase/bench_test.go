package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/exitstatus"
)

// The lab's old subcommand names its new command, with the arguments given,
// as a usage error: nothing is measured.
func TestBenchNamesLabCommand(t *testing.T) {
	r := cli(t, "", "bench", "batching", "--runs", "3", "--chart", "b.svg")
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "run protobase-bench batching --runs 3 --chart b.svg", "docs/benchmarks.md")
	if r.stdout != "" {
		t.Fatalf("stdout: %q", r.stdout)
	}
}

// The server's binary links neither the lab nor the plotting library its
// charts are drawn with: both belong to protobase-bench.
func TestBinaryLinksNoLab(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "gonum.org/") || p == "github.com/protobase/protobase/bench" ||
			strings.HasPrefix(p, "github.com/protobase/protobase/bench/") {
			t.Errorf("cmd/protobase depends on %s", p)
		}
	}
}
