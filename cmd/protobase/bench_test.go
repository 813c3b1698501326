package main

import (
	"encoding/json"
	"fmt"
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
// to stdout, progress lines to stderr, both files are written, and the
// JSON holds what was measured: a row per mode and batch size with a
// positive rate inside its spread, and the server's point-lookup count
// equal to the lookup queries the client had answered.
func TestBenchBatchingCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "b.json"), filepath.Join(dir, "b.svg")
	r := mustCLI(t, "", "bench", "batching", "--quick", "--records", "500", "--batches", "1,100",
		"--runs", "1", "--duration", "20ms", "--warmup", "0s", "--json", js, "--chart", svg)
	names := []string{"lookup batch=1", "lookup batch=100", "transport batch=1", "transport batch=100"}
	wantContains(t, r.stdout, append(names, "queries/s")...)
	wantContains(t, r.stderr, "transport batch=100")
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Experiment string   `json:"experiment"`
		Notes      []string `json:"notes"`
		Rows       []struct {
			Name             string
			Params           map[string]any
			Unit             string
			Median, Min, Max float64
			Runs             int
			Reference        *struct{ Value float64 }
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Experiment != "batching" || len(doc.Rows) != len(names) {
		t.Fatalf("json: %v %+v", err, doc)
	}
	for i, row := range doc.Rows {
		mode, batch := "lookup", 1.0
		if i >= 2 {
			mode = "transport"
		}
		if i%2 == 1 {
			batch = 100
		}
		if row.Name != names[i] || row.Params["mode"] != mode || row.Params["batch"] != batch || row.Unit != "queries/s" ||
			row.Runs != 1 || row.Median <= 0 || row.Min > row.Median || row.Median > row.Max || row.Reference == nil {
			t.Errorf("row %d: %+v", i, row)
		}
	}
	var lookups, queries uint64
	for _, n := range doc.Notes {
		if _, err := fmt.Sscanf(n, "lookup rows: 500 records preloaded; the server made %d point lookups for %d queries answered", &lookups, &queries); err == nil {
			break
		}
	}
	if queries == 0 || lookups != queries {
		t.Fatalf("server made %d point lookups for %d lookup queries answered (notes %q)", lookups, queries, doc.Notes)
	}
	if fi, err := os.Stat(svg); err != nil || fi.Size() == 0 {
		t.Fatalf("chart: %v", err)
	}
}
