package bench

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"os"
	"slices"
)

// htmlReport is the page WriteHTML fills: no scripts, no external
// resources (styles inline, charts inline SVG, system fonts), so that the
// file can be mailed or attached as it is.
var htmlReport = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Protobase lab report</title>
<style>
body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.flagged td{background:#fff4d6}
.smoke{background:#fff4d6;border-left:4px solid #e0a000;padding:.5rem 1rem}
.flag{color:#8a5a00}
.note{color:#555;font-style:italic}
figure.chart svg{max-width:100%;height:auto}
</style>
</head>
<body>
<h1>Protobase lab report</h1>
<p>{{.Machine}}</p>
{{if .Quick}}<p class="smoke"><strong>Smoke run (--quick)</strong>: every figure below comes from two short runs on small data. It checks that the lab works; do not compare these numbers or quote them.</p>{{end}}
<table class="summary">
<tr><th>experiment</th><th>asks</th><th>this run answered</th></tr>
{{range .Sections}}<tr><td><a href="#exp-{{.Name}}">{{.Name}}</a></td><td>{{.Question}}</td><td>{{.Answer}}{{if .Flags}} <span class="flag">⚠ {{len .Flags}} suspicious ordering(s), see below.</span>{{end}}</td></tr>
{{end}}</table>
<p>{{.Published}} How the lab runs and what each experiment measures: <a href="{{.Doc}}">docs/benchmarks.md</a>.</p>
{{range .Sections}}
<section class="experiment" id="exp-{{.Name}}">
<h2>{{.Name}}</h2>
<p>{{.Question}}.</p>
{{if .Sources}}<p>Published figures: {{range $i, $s := .Sources}}{{if $i}}; {{end}}{{$s}}{{end}}.</p>{{end}}
{{if .Quick}}<p class="smoke"><strong>Smoke figures.</strong> Measured with --quick: two short runs on small data.</p>{{end}}
<table class="rows">
<tr><th>configuration</th><th>{{if .Quick}}median (smoke){{else}}median{{end}}</th><th>min</th><th>max</th><th>unit</th><th>published</th><th>ratio</th></tr>
{{range .Rows}}<tr{{if .Flagged}} class="flagged"{{end}}><td>{{if .Flagged}}⚠ {{end}}{{.Name}}</td><td class="num">{{.Median}}</td><td class="num">{{.Min}}</td><td class="num">{{.Max}}</td><td>{{.Unit}}</td><td class="num">{{.Published}}</td><td class="num">{{.Ratio}}</td></tr>
{{end}}</table>
{{range .Flags}}<p class="flag">⚠ {{.Text}}</p>
{{end}}{{range .Notes}}<p class="note">{{.}}</p>
{{end}}{{if .Chart}}<figure class="chart">{{.Chart}}<figcaption>{{.ChartTitle}}</figcaption></figure>{{end}}
</section>
{{end}}
</body>
</html>
`))

type htmlPage struct {
	Machine   string
	Quick     bool
	Published string
	Doc       string
	Sections  []htmlSection
}

type htmlSection struct {
	Name, Question, Answer string
	Sources                []string
	Quick                  bool
	Rows                   []htmlRow
	Flags                  []Flag
	Notes                  []string
	Chart                  template.HTML
	ChartTitle             string
}

type htmlRow struct {
	Name, Median, Min, Max, Unit, Published, Ratio string
	Flagged                                        bool
}

// WriteHTML writes results as one self-contained HTML page: the same
// opening, tables, flags and notes as report.md, with each chart as inline
// SVG.
func WriteHTML(w io.Writer, results []*Result) error {
	page := htmlPage{Published: PublishedMeaning, Doc: BenchmarksDoc, Quick: slices.ContainsFunc(results, isQuick)}
	if len(results) > 0 {
		m := results[0].Machine
		page.Machine = fmt.Sprintf("%s, %d CPUs, %s, %s; started %s.", m.Model, m.CPUs, m.Go, m.OS, results[0].Started.Format("2006-01-02 15:04 MST"))
	}
	for _, res := range results {
		sec, err := htmlSectionOf(res)
		if err != nil {
			return err
		}
		page.Sections = append(page.Sections, sec)
	}
	if err := htmlReport.Execute(w, page); err != nil {
		return fmt.Errorf("render HTML report: %w", err)
	}
	return nil
}

func htmlSectionOf(res *Result) (htmlSection, error) {
	sec := htmlSection{
		Name: res.Experiment, Question: question(res), Answer: answer(res),
		Sources: sources(res), Quick: isQuick(res), Flags: Flags(res),
	}
	flagged := map[string]bool{}
	for _, f := range sec.Flags {
		for _, n := range f.Rows {
			flagged[n] = true
		}
	}
	for _, r := range res.Rows {
		hr := htmlRow{Name: r.Name, Median: formatValue(r.Median), Min: formatValue(r.Min), Max: formatValue(r.Max), Unit: r.Unit, Ratio: formatRatio(r), Flagged: flagged[r.Name]}
		if r.Reference != nil {
			hr.Published = formatValue(r.Reference.Value)
		}
		sec.Rows = append(sec.Rows, hr)
	}
	for _, n := range res.Notes {
		if n != QuickNote {
			sec.Notes = append(sec.Notes, n)
		}
	}
	if res.Chart != nil {
		svg, err := inlineSVG(res)
		if err != nil {
			return htmlSection{}, fmt.Errorf("%s chart: %w", res.Experiment, err)
		}
		sec.Chart, sec.ChartTitle = svg, res.Chart.Title
	}
	return sec, nil
}

// inlineSVG renders res's chart as an <svg> element to embed in HTML: the
// SVG file's XML declaration is dropped. The markup is our own renderer's
// output, which escapes the text it draws.
func inlineSVG(res *Result) (template.HTML, error) {
	var b bytes.Buffer
	if err := render(res, &b, "svg"); err != nil {
		return "", err
	}
	out := b.Bytes()
	i := bytes.Index(out, []byte("<svg"))
	if i < 0 {
		return "", fmt.Errorf("renderer wrote no <svg> element")
	}
	return template.HTML(out[i:]), nil //nolint:gosec // generated by render, text escaped by vgsvg
}

// WriteHTMLFile writes WriteHTML's page to path.
func WriteHTMLFile(path string, results []*Result) error {
	var b bytes.Buffer
	if err := WriteHTML(&b, results); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
