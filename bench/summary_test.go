package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

// ingestLike is a small synthetic result shaped like ingest's: a batch
// param, two configurations, and one configuration where the larger batch
// is slower.
func ingestLike(quick bool) *Result {
	row := func(cfg string, batch int, v float64) Row {
		return NewRow(cfg+" batch="+itoa(batch), map[string]any{"config": cfg, "batch": batch}, "records/s", []float64{v}, nil)
	}
	res := &Result{
		Experiment: "ingestlike",
		Machine:    Machine{CPUs: 2, Model: "test cpu", Go: "go1.x", OS: "linux/amd64"},
		Started:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Rows: []Row{
			row("sync=on", 1, 2000), row("sync=on", 100, 300000), row("sync=on", 10000, 900000),
			row("sync=off", 1, 100000), row("sync=off", 100, 1100000), row("sync=off", 10000, 800000),
		},
		Chart: &Chart{Title: "ingest", Kind: Lines, XLabel: "records per request", YLabel: "records/s", X: "batch", Series: "config", Unit: "records/s", LogX: true, LogY: true},
	}
	if quick {
		res.Notes = append(res.Notes, QuickNote)
	}
	return res
}

func itoa(n int) string { return formatValue(float64(n)) }

func TestFlagsLargerBatchSlower(t *testing.T) {
	flags := Flags(ingestLike(true))
	if len(flags) != 1 {
		t.Fatalf("flags = %+v, want exactly the sync=off 10000 < 100 one", flags)
	}
	f := flags[0]
	if f.Rows[0] != "sync=off batch=10,000" || f.Rows[1] != "sync=off batch=100" {
		t.Errorf("flagged rows %q", f.Rows)
	}
	if !strings.Contains(f.Text, "larger batch should not be slower") || !strings.Contains(f.Text, "smoke run") {
		t.Errorf("flag text %q", f.Text)
	}
	full := Flags(ingestLike(false))
	if len(full) != 1 || strings.Contains(full[0].Text, "smoke") {
		t.Errorf("full-run flag %+v must not call itself a smoke figure", full)
	}
}

// Rows in another unit (MB/s beside records/s) do not repeat a flag.
func TestFlagsOncePerPair(t *testing.T) {
	res := ingestLike(false)
	for _, r := range res.Rows[:len(res.Rows):len(res.Rows)] {
		mb := r
		mb.Unit = "MB/s"
		res.Rows = append(res.Rows, mb)
	}
	if got := len(Flags(res)); got != 1 {
		t.Errorf("%d flags, want 1", got)
	}
}

func TestFlagsShareAboveCeiling(t *testing.T) {
	res := &Result{Experiment: "hop", Rows: []Row{
		NewRow("grpc share of direct", map[string]any{"mode": "grpc"}, "× no hop", []float64{1.2}, nil),
		NewRow("http2 share of direct", map[string]any{"mode": "http2"}, "× no hop", []float64{0.4}, nil),
	}}
	flags := Flags(res)
	if len(flags) != 1 || flags[0].Rows[0] != "grpc share of direct" || !strings.Contains(flags[0].Text, "above its ceiling of 1") {
		t.Errorf("flags = %+v, want one for the grpc share", flags)
	}
}

// Rows that are better low (ns/op) grow with size by nature: no flags.
func TestFlagsIgnoreCosts(t *testing.T) {
	res := &Result{Experiment: "cost", Rows: []Row{
		NewRow("a batch=1", map[string]any{"batch": 1}, "ns/op", []float64{10}, nil),
		NewRow("a batch=10", map[string]any{"batch": 10}, "ns/op", []float64{5}, nil),
	}}
	if f := Flags(res); len(f) != 0 {
		t.Errorf("flags = %+v, want none", f)
	}
}

// The report opens with one line per experiment, says what published
// means and where the docs are, marks quick results as smoke figures and
// flags the suspicious row in its table.
func TestReportMarkdownOpening(t *testing.T) {
	dir := t.TempDir()
	path, err := WriteReportDir(dir, []*Result{testResult(), ingestLike(true)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	head, _, ok := strings.Cut(md, "\n## ")
	if !ok {
		t.Fatalf("report has no sections:\n%s", md)
	}
	for _, want := range []string{
		"| experiment | asks | this run answered |",
		"| [demo](#demo) | demo | b batch=1000 was fastest at 3,000,000 op/s, 30,000× b batch=1; measured/published was 0.00116× on the one row with a published figure. |",
		"| [ingestlike](#ingestlike) | ingestlike | sync=off batch=100 was fastest at 1,100,000 records/s, 11× sync=off batch=1 (smoke figures). ⚠ 1 suspicious ordering(s), see below. |",
		"**Smoke run (`--quick`)**",
		`"Published" is the figure the experiment's seed reported`,
		"[docs/benchmarks.md](" + BenchmarksDoc + ")",
	} {
		if !strings.Contains(head, want) {
			t.Errorf("report opening lacks %q:\n%s", want, head)
		}
	}
	_, quick, ok := strings.Cut(md, "## ingestlike")
	if !ok {
		t.Fatal("no ingestlike section")
	}
	for _, want := range []string{
		"> **Smoke figures.**",
		"| configuration | median (smoke) |",
		"| ⚠ sync=off batch=10,000 | 800,000 |",
		"| ⚠ sync=off batch=100 | 1,100,000 |",
		"| sync=on batch=100 | 300,000 |",
		"\n⚠ sync=off batch=10,000 (800,000 records/s) is slower than sync=off batch=100",
	} {
		if !strings.Contains(quick, want) {
			t.Errorf("ingestlike section lacks %q:\n%s", want, quick)
		}
	}
	if strings.Contains(quick, "_"+QuickNote+"_") {
		t.Error("the quick note is repeated as a plain note")
	}
	_, demo, _ := strings.Cut(md, "## demo")
	demo, _, _ = strings.Cut(demo, "## ingestlike")
	if strings.Contains(demo, "smoke") || strings.Contains(demo, "⚠") {
		t.Errorf("full-run section is marked:\n%s", demo)
	}
	for _, f := range []string{"report.html", "demo.png", "ingestlike.png", "demo.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func labels(ts []plot.Tick) []string {
	var out []string
	for _, t := range ts {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}

// A log axis is labelled at 1, 2, 5 × 10^k over a few decades, at powers
// of ten alone over many, and at its ends when under one decade holds
// fewer than two labels.
func TestLogTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		{100, 10000, []string{"100", "200", "500", "1,000", "2,000", "5,000", "10,000"}},
		{1, 1e7, []string{"1", "10", "100", "1,000", "10,000", "100,000", "1,000,000", "10,000,000"}},
		{1528, 9464, []string{"2,000", "5,000"}},
		{2100, 4800, []string{"2,100", "4,800"}},
	} {
		got := labels(logTicks{}.Ticks(c.lo, c.hi))
		if !slices.Equal(got, c.want) {
			t.Errorf("ticks %g..%g labelled %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}
