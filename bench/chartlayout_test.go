package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"strings"
	"testing"
)

// chartCase builds a result like one experiment's: nx X categories and
// the named series, each value from val, published figures from ref (nil:
// none), with the --quick note when quick.
func chartCase(kind ChartKind, xs []string, series []string, val func(s, x int) float64, ref func(s, x int) float64, quick bool) *Result {
	res := &Result{
		Experiment: "demo",
		Chart: &Chart{Title: "Write acknowledgement to watcher receipt, p99 and max", Kind: kind,
			XLabel: "x", YLabel: "operations/s", X: "x", Series: "s", Unit: "op/s"},
	}
	if kind == Lines {
		res.Chart.LogX = true
	}
	for i, s := range series {
		for j, x := range xs {
			var r *Reference
			if ref != nil {
				if v := ref(i, j); v > 0 {
					r = &Reference{Value: v, Source: "seed"}
				}
			}
			res.Rows = append(res.Rows, NewRow(s+" "+x, map[string]any{"x": x, "s": s}, "op/s", []float64{val(i, j)}, r))
		}
	}
	if quick {
		res.Notes = append(res.Notes, QuickNote)
	}
	return res
}

// chartCases are the shapes of the lab's charts: few and many series, long
// series names, a tall bar in the last category beside small ones, a
// published series per measured one.
func chartCases() map[string]*Result {
	names := func(n int, prefix string) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s %d", prefix, i))
		}
		return out
	}
	return map[string]*Result{
		"watch": chartCase(Bars, []string{"1", "10"}, []string{"p99", "max"},
			func(s, x int) float64 { return []float64{2.68, 99}[x] + float64(10*s*x) }, nil, true),
		"transports": chartCase(Bars, []string{"direct", "direct-get", "grpc", "grpc-search", "http2", "nats"}, []string{"measured"},
			func(_, x int) float64 { return float64(2000 + 4000*x) }, func(_, x int) float64 { return float64(1000 + 3000*x) }, true),
		"patterns": chartCase(Bars, []string{"alternate", "send-all", "no-response"}, names(6, "search, batch 1000 and more words"),
			func(s, x int) float64 { return float64(1000 * (1 + s) * (1 + x)) }, nil, false),
		"batching": chartCase(Lines, []string{"1", "10", "100", "1000", "10000"}, []string{"raw", "transport", "lookup"},
			func(s, x int) float64 { return float64(10000*(x+1)*(x+1) + 1000*s) }, func(_, x int) float64 { return float64(9000 * (x + 1)) }, true),
		"layout": chartCase(Lines, []string{"1530", "4860", "9460"}, names(7, "wrapped unmarshal+payload"),
			func(s, x int) float64 { return float64(1000*(s+1) + 500*x) }, func(s, x int) float64 {
				if s == 0 || s > 4 {
					return 0
				}
				return float64(500*s + 100*x)
			}, false),
	}
}

// Every chart's legend entries, title, data area and bars are laid out
// apart: no legend entry overlaps another, the title or the data area, no
// bar leaves the data area or overlaps another, everything is inside the
// image, the smallest bar is tall enough to see, and the axes' labels
// leave the data area most of the image. (Each experiment's test checks
// its own chart the same way, through labtest.CheckResult.)
func TestChartLayoutApart(t *testing.T) {
	cases := chartCases()
	for name, res := range cases {
		t.Run(name, func(t *testing.T) {
			if err := CheckChartLayout(res); err != nil {
				t.Error(err)
			}
		})
	}
}

// Each of the layout chart's eleven series has a colour of its own.
func TestChartColoursDistinct(t *testing.T) {
	res := chartCases()["layout"]
	_, series := chartData(res.Chart, res.Rows)
	if len(series) != 11 {
		t.Fatalf("%d series, want 11", len(series))
	}
	seen := map[color.RGBA]string{}
	for i, s := range series {
		r, g, b, a := seriesColor(s, i).RGBA()
		c := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
		if prev, ok := seen[c]; ok {
			t.Errorf("series %q has the colour of %q", s.name, prev)
		}
		seen[c] = s.name
	}
}

// A chart measured with --quick says so in its title; one measured in
// full does not.
func TestChartSaysSmoke(t *testing.T) {
	for name, quick := range map[string]bool{"watch": true, "patterns": false} {
		var b bytes.Buffer
		if err := render(chartCases()[name], &b, "svg"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "smoke run"); got != quick {
			t.Errorf("%s (quick %v): chart says smoke run: %v", name, quick, got)
		}
	}
}

// An axis label longer than its axis squeezes the data area, and
// CheckChartLayout says so.
func TestChartLayoutSqueezed(t *testing.T) {
	res := chartCases()["patterns"]
	res.Chart.YLabel = "operations/s (search: queries, write: records)"
	res.Chart.LogY = true
	if err := CheckChartLayout(res); err == nil || !strings.Contains(err.Error(), "squeezed") {
		t.Fatalf("got %v, want the data area squeezed", err)
	}
}
