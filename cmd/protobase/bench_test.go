package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Bad bench command lines are usage errors (exit 2) that say what is wrong,
// and they are refused before anything is measured.
func TestBenchFlagErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"zero runs", []string{"bench", "batching", "--runs", "0"}, "runs must be at least 1"},
		{"negative duration", []string{"bench", "batching", "--duration", "-1s"}, "duration must be at least 1ms"},
		{"unparsable duration", []string{"bench", "batching", "--duration", "fast"}, "invalid argument"},
		{"unknown experiment", []string{"bench", "nope"}, `unknown command "nope"`},
		{"unwritable json", []string{"bench", "batching", "--json", filepath.Join(dir, "missing", "x.json")}, "--json"},
		{"unknown chart format", []string{"bench", "batching", "--chart", filepath.Join(dir, "x.gif")}, "unknown chart format"},
		{"bad batch", []string{"bench", "batching", "--quick", "--batches", "0"}, "out of range"},
		{"all without out", []string{"bench", "all", "--quick"}, "--out is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, "", tc.args...)
			if tc.name == "bad batch" {
				// Checked by the experiment itself: the operation fails.
				wantCode(t, r, exitFailed)
			} else {
				wantCode(t, r, exitUsage)
			}
			wantContains(t, r.stderr, tc.want)
		})
	}
}

// One experiment through the CLI with --json and --chart: the table goes
// to stdout, progress lines to stderr, and both files are written.
func TestBenchBatchingCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "b.json"), filepath.Join(dir, "b.svg")
	r := mustCLI(t, "", "bench", "batching", "--quick", "--transport-only", "--batches", "1,100",
		"--runs", "1", "--duration", "20ms", "--warmup", "0s", "--json", js, "--chart", svg)
	wantContains(t, r.stdout, "transport batch=1 ", "transport batch=100", "queries/s", "9,480")
	wantContains(t, r.stderr, "transport batch=100")
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Experiment string `json:"experiment"`
		Rows       []any  `json:"rows"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Experiment != "batching" || len(doc.Rows) != 2 {
		t.Fatalf("json: %v %+v", err, doc)
	}
	if fi, err := os.Stat(svg); err != nil || fi.Size() == 0 {
		t.Fatalf("chart: %v", err)
	}
}
