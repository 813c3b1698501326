package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// formatValue prints a measurement with three significant digits and
// thousands separators for large values (1,939,291 → "1,940,000"; 0.0123 →
// "0.0123").
func formatValue(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case math.Abs(v) >= 1000:
		r := math.Round(v)
		digits := int(math.Floor(math.Log10(math.Abs(r)))) + 1
		if digits > 3 {
			p := math.Pow(10, float64(digits-3))
			r = math.Round(r/p) * p
		}
		return thousands(strconv.FormatFloat(r, 'f', 0, 64))
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// thousands inserts commas into a string of digits (with optional sign).
func thousands(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}

// formatRatio prints measured/published, or "" without a reference.
func formatRatio(r Row) string {
	if r.Reference == nil {
		return ""
	}
	return strconv.FormatFloat(r.Ratio(), 'f', 2, 64) + "×"
}

// WriteTable writes res as a table: one line per row with median, min,
// max, unit, the published figure and measured/published.
func WriteTable(w io.Writer, res *Result) error {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetTitle(res.Experiment)
	t.AppendHeader(table.Row{"configuration", "median", "min", "max", "unit", "published", "ratio"})
	for _, r := range res.Rows {
		pub := ""
		if r.Reference != nil {
			pub = formatValue(r.Reference.Value)
		}
		t.AppendRow(table.Row{r.Name, formatValue(r.Median), formatValue(r.Min), formatValue(r.Max), r.Unit, pub, formatRatio(r)})
	}
	right := text.AlignRight
	t.SetColumnConfigs([]table.ColumnConfig{
		{Number: 2, Align: right}, {Number: 3, Align: right}, {Number: 4, Align: right},
		{Number: 6, Align: right}, {Number: 7, Align: right},
	})
	footer := fmt.Sprintf("%d runs per row; %s, %d CPUs, %s, %s", runsOf(res), res.Machine.Model, res.Machine.CPUs, res.Machine.Go, res.Machine.OS)
	t.SetCaption("%s", strings.Join(append([]string{footer}, res.Notes...), "\n"))
	t.Render()
	return nil
}

func runsOf(res *Result) int {
	if len(res.Rows) == 0 {
		return 0
	}
	return res.Rows[0].Runs
}

// WriteMarkdown writes res as a Markdown table with its notes. Rows that
// Flags finds suspicious are marked ⚠ and explained below the table.
func WriteMarkdown(w io.Writer, res *Result) error {
	flags := Flags(res)
	flagged := map[string]bool{}
	for _, f := range flags {
		for _, n := range f.Rows {
			flagged[n] = true
		}
	}
	median := "median"
	if isQuick(res) {
		median = "median (smoke)"
	}
	t := table.NewWriter()
	t.AppendHeader(table.Row{"configuration", median, "min", "max", "unit", "published", "ratio"})
	for _, r := range res.Rows {
		pub := ""
		if r.Reference != nil {
			pub = formatValue(r.Reference.Value)
		}
		name := r.Name
		if flagged[name] {
			name = "⚠ " + name
		}
		t.AppendRow(table.Row{name, formatValue(r.Median), formatValue(r.Min), formatValue(r.Max), r.Unit, pub, formatRatio(r)})
	}
	var b strings.Builder
	if isQuick(res) {
		b.WriteString("> **Smoke figures.** Measured with `--quick`: two short runs on small data. They show the lab works, not how fast anything is; orderings between close rows can be noise.\n\n")
	}
	b.WriteString(t.RenderMarkdown())
	b.WriteString("\n")
	for _, f := range flags {
		fmt.Fprintf(&b, "\n⚠ %s\n", f.Text)
	}
	for _, n := range res.Notes {
		if n != QuickNote {
			fmt.Fprintf(&b, "\n_%s_\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MarshalResult encodes res in the lab's JSON schema (see Result; rows'
// params are objects with sorted keys).
func MarshalResult(res *Result) ([]byte, error) {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s result: %w", res.Experiment, err)
	}
	return append(b, '\n'), nil
}

// WriteJSON writes res to path in the lab's JSON schema.
func WriteJSON(path string, res *Result) error {
	b, err := MarshalResult(res)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// CheckWritable reports whether a file can be created at path, without
// leaving one behind: flags are checked before minutes of measuring.
func CheckWritable(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	f, err := os.CreateTemp(dir, ".protobase-bench-*")
	if err != nil {
		return fmt.Errorf("%s: directory not writable: %w", path, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// WriteReportDir writes, into dir, NAME.json and NAME.png for every
// result, a report.md embedding every table and chart, and report.html,
// the same report as one self-contained page; it returns report.md's path.
func WriteReportDir(dir string, results []*Result) (string, error) {
	var md strings.Builder
	writeIntro(&md, results)
	for _, res := range results {
		if err := WriteJSON(filepath.Join(dir, res.Experiment+".json"), res); err != nil {
			return "", err
		}
		fmt.Fprintf(&md, "\n## %s\n\n%s.\n\n", res.Experiment, question(res))
		if src := sources(res); len(src) > 0 {
			fmt.Fprintf(&md, "Published figures: %s.\n\n", strings.Join(src, "; "))
		}
		if err := WriteMarkdown(&md, res); err != nil {
			return "", err
		}
		if res.Chart != nil {
			chart := res.Experiment + ".png"
			if err := Draw(res, filepath.Join(dir, chart)); err != nil {
				return "", err
			}
			fmt.Fprintf(&md, "\n![%s](%s)\n", res.Chart.Title, chart)
		}
		fmt.Fprintf(&md, "\nData: [%s.json](%s.json)\n", res.Experiment, res.Experiment)
	}
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, []byte(md.String()), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := WriteHTMLFile(filepath.Join(dir, "report.html"), results); err != nil {
		return "", err
	}
	return path, nil
}

// writeIntro writes the report's title and its opening: the machine, what
// each experiment asks and what this run answered, and what "published"
// means.
func writeIntro(md *strings.Builder, results []*Result) {
	md.WriteString("# Protobase lab report\n")
	if len(results) > 0 {
		m := results[0].Machine
		fmt.Fprintf(md, "\n%s, %d CPUs, %s, %s; started %s.\n", m.Model, m.CPUs, m.Go, m.OS, results[0].Started.Format("2006-01-02 15:04 MST"))
	}
	if slices.ContainsFunc(results, isQuick) {
		md.WriteString("\n**Smoke run (`--quick`)**: every figure below comes from two short runs on small data. It checks that the lab works; do not compare these numbers or quote them.\n")
	}
	md.WriteString("\n| experiment | asks | this run answered |\n|---|---|---|\n")
	for _, res := range results {
		a := answer(res)
		if n := len(Flags(res)); n > 0 {
			a += fmt.Sprintf(" ⚠ %d suspicious ordering(s), see below.", n)
		}
		fmt.Fprintf(md, "| [%s](#%s) | %s | %s |\n", res.Experiment, res.Experiment, mdCell(question(res)), mdCell(a))
	}
	fmt.Fprintf(md, "\n%s How the lab runs and what each experiment measures: [docs/benchmarks.md](%s).\n", PublishedMeaning, BenchmarksDoc)
}

// mdCell escapes a Markdown table cell.
func mdCell(s string) string {
	return strings.ReplaceAll(s, "|", "\\|")
}
