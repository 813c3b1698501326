package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// htmlSectionCheck is what checkReportHTML found in one experiment's
// section.
type htmlSectionCheck struct {
	svgs  int // <svg> elements
	marks int // drawing elements (path, rect, text …) inside them
}

// checkReportHTML tokenizes a report page and returns, per experiment
// section (id "exp-NAME"), its charts; it fails on anything that would
// make the page less than self-contained: scripts, external stylesheets,
// images or frames, and URLs other than anchors and the docs link.
func checkReportHTML(r io.Reader) (map[string]htmlSectionCheck, error) {
	z := html.NewTokenizer(r)
	sections := map[string]htmlSectionCheck{}
	current, inSVG := "", 0
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if errors.Is(z.Err(), io.EOF) {
				return sections, nil
			}
			return nil, z.Err()
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			switch tok.Data {
			case "script", "link", "img", "iframe", "object", "embed":
				return nil, fmt.Errorf("self-contained page has a <%s>", tok.Data)
			case "section":
				if id := attr(tok, "id"); strings.HasPrefix(id, "exp-") {
					current = strings.TrimPrefix(id, "exp-")
					sections[current] = htmlSectionCheck{}
				}
			case "svg":
				if tt == html.StartTagToken {
					inSVG++
				}
				c := sections[current]
				c.svgs++
				sections[current] = c
			case "path", "rect", "text", "line", "circle", "polyline":
				if inSVG > 0 {
					c := sections[current]
					c.marks++
					sections[current] = c
				}
			}
			for _, a := range tok.Attr {
				if (a.Key == "src" || a.Key == "href") && !strings.HasPrefix(a.Val, "#") && a.Val != BenchmarksDoc {
					return nil, fmt.Errorf("<%s %s=%q> reaches outside the page", tok.Data, a.Key, a.Val)
				}
				if a.Key == "style" && strings.Contains(a.Val, "url(") {
					return nil, fmt.Errorf("<%s> style loads %q", tok.Data, a.Val)
				}
			}
		case html.EndTagToken:
			switch z.Token().Data {
			case "svg":
				inSVG--
			case "section":
				current = ""
			}
		}
	}
}

func attr(tok html.Token, key string) string {
	for _, a := range tok.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// requireCharts fails t unless every name has a section with one
// non-empty chart.
func requireCharts(t *testing.T, sections map[string]htmlSectionCheck, names []string) {
	t.Helper()
	for _, n := range names {
		c, ok := sections[n]
		switch {
		case !ok:
			t.Errorf("no section for experiment %s", n)
		case c.svgs != 1:
			t.Errorf("%s: %d charts, want 1", n, c.svgs)
		case c.marks < 10:
			t.Errorf("%s: chart has %d drawing elements: empty", n, c.marks)
		}
	}
}

func TestReportHTML(t *testing.T) {
	results := []*Result{testResult(), ingestLike(true)}
	var b bytes.Buffer
	if err := WriteHTML(&b, results); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	sections, err := checkReportHTML(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	requireCharts(t, sections, []string{"demo", "ingestlike"})
	for _, want := range []string{
		`<a href="#exp-ingestlike">ingestlike</a>`,
		"Smoke run (--quick)",
		"median (smoke)",
		`<tr class="flagged"><td>⚠ sync=off batch=10,000</td>`,
		"a larger batch should not be slower",
		`"Published" is the figure`,
	} {
		if !strings.Contains(page, html.EscapeString(want)) && !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// A hostile experiment name or row name is text, not markup.
func TestReportHTMLEscapes(t *testing.T) {
	res := testResult()
	res.Experiment = `x"><script>alert(1)</script>`
	res.Rows[0].Name = "<img src=http://example.com/a.png>"
	var b bytes.Buffer
	if err := WriteHTML(&b, []*Result{res}); err != nil {
		t.Fatal(err)
	}
	if _, err := checkReportHTML(&b); err != nil {
		t.Fatal(err)
	}
}

// TestRenderedReport checks the DOM that headless Chromium made of a
// report page (make check-report sets PROTOBASE_REPORT_DOM to its
// --dump-dom output, and PROTOBASE_REPORT_DIR to the report's directory):
// every experiment with a JSON file has a section with a non-empty chart.
func TestRenderedReport(t *testing.T) {
	domPath, dir := os.Getenv("PROTOBASE_REPORT_DOM"), os.Getenv("PROTOBASE_REPORT_DIR")
	if domPath == "" || dir == "" {
		t.Skip("PROTOBASE_REPORT_DOM and PROTOBASE_REPORT_DIR are set by make check-report")
	}
	f, err := os.Open(domPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections, err := checkReportHTML(f)
	if err != nil {
		t.Fatal(err)
	}
	jsons, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(jsons) == 0 {
		t.Fatalf("no experiment results in %s (%v)", dir, err)
	}
	var names []string
	for _, j := range jsons {
		names = append(names, strings.TrimSuffix(filepath.Base(j), ".json"))
	}
	requireCharts(t, sections, names)
}

// The checker itself fails on what it must catch.
func TestCheckReportHTMLCatches(t *testing.T) {
	if _, err := checkReportHTML(strings.NewReader(`<p><script src="x.js"></script>`)); err == nil {
		t.Error("a script passed")
	}
	if _, err := checkReportHTML(strings.NewReader(`<img src="https://example.com/x.png">`)); err == nil {
		t.Error("an external image passed")
	}
	res := testResult()
	res.Chart = nil
	var b bytes.Buffer
	if err := WriteHTML(&b, []*Result{res}); err != nil {
		t.Fatal(err)
	}
	sections, err := checkReportHTML(&b)
	if err != nil {
		t.Fatal(err)
	}
	if c := sections["demo"]; c.svgs != 0 {
		t.Errorf("chartless section has %d charts", c.svgs)
	}
}
