package bench

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// publishedSeries names the series of published figures on every chart.
const publishedSeries = "published"

// CheckChartPath reports whether path names a chart format Draw writes
// (.png or .svg).
func CheckChartPath(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg":
		return nil
	}
	return fmt.Errorf("%s: unknown chart format %q (use .png or .svg)", path, filepath.Ext(path))
}

// chartSeries is one series of a chart: a value per X category.
type chartSeries struct {
	name   string
	values map[string]float64
	// of is, for a series of published figures, the index of the measured
	// series it is the reference of, or -1 when it is the only published
	// series (named publishedSeries, drawn grey). It is 0 for measured series.
	of        int
	published bool
}

// chartData groups res's rows into X categories (in row order) and series
// (measured series in row order, then the published figures). The
// published figures form one series, publishedSeries, when they belong to
// one measured series (or X alone tells them apart); when several measured
// series carry references, each gets its own "NAME (published)" series so
// that figures sharing an X do not overwrite each other.
func chartData(c *Chart, rows []Row) (xs []string, series []chartSeries) {
	index := map[string]int{}
	refs := map[int]map[string]float64{} // measured series index → X → published value
	for _, r := range rows {
		if c.Unit != "" && r.Unit != c.Unit {
			continue
		}
		x := paramString(r.Params[c.X])
		if !slices.Contains(xs, x) {
			xs = append(xs, x)
		}
		name := "measured"
		if c.Series != "" {
			name = paramString(r.Params[c.Series])
		}
		i, ok := index[name]
		if !ok {
			i = len(series)
			index[name] = i
			series = append(series, chartSeries{name: name, values: map[string]float64{}})
		}
		series[i].values[x] = r.Median
		if r.Reference != nil {
			if refs[i] == nil {
				refs[i] = map[string]float64{}
			}
			refs[i][x] = r.Reference.Value
		}
	}
	switch {
	case len(refs) == 1 || sameFigures(refs):
		// One series of published figures, or several series sharing the
		// same ones (batching's modes share the seed's one curve): draw it
		// once.
		for _, v := range refs {
			series = append(series, chartSeries{name: publishedSeries, values: v, of: -1, published: true})
			break
		}
	case len(refs) > 1:
		n := len(series)
		for i := range n {
			if v := refs[i]; v != nil {
				series = append(series, chartSeries{name: series[i].name + " (" + publishedSeries + ")", values: v, of: i, published: true})
			}
		}
	}
	return xs, series
}

// sameFigures reports whether every series' published figures are the
// same X → value map.
func sameFigures(refs map[int]map[string]float64) bool {
	var first map[string]float64
	for _, v := range refs {
		if first == nil {
			first = v
		} else if !maps.Equal(first, v) {
			return false
		}
	}
	return true
}

func paramString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// Draw renders res's chart to path (.png or .svg, by extension).
func Draw(res *Result, path string) error {
	if err := CheckChartPath(path); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create chart %s: %w", path, err)
	}
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	err = render(res, f, format)
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close chart %s: %w", path, cerr)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// render writes res's chart to w as "png" or "svg". Log scales are used
// when asked and, for Y, whenever the highest value exceeds maxLinearSpan
// times the lowest. The legend is drawn in a column right of the plot so
// that it never covers data (see layoutChart).
func render(res *Result, w io.Writer, format string) error {
	_, err := renderLayout(res, w, format)
	return err
}

// renderLayout is render, returning where it put each part of the chart.
func renderLayout(res *Result, w io.Writer, format string) (chartLayout, error) {
	c := res.Chart
	if c == nil {
		return chartLayout{}, fmt.Errorf("experiment %s has no chart", res.Experiment)
	}
	xs, series := chartData(c, res.Rows)
	if len(xs) == 0 {
		return chartLayout{}, errors.New("no rows to draw")
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	if b := c.better(); b != "" {
		// On the title's second line: appended to the Y label it would
		// make the label longer than the axis, and the plot shrinks.
		p.Title.Text += "\n(" + b + ")"
	}
	if isQuick(res) {
		// A chart is often seen without the report around it.
		p.Title.Text += "\n" + SmokeTitle
	}
	p.Add(plotter.NewGrid())

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	logY := c.LogY || (lo > 0 && hi/lo > maxLinearSpan)

	var (
		entries []legendEntry
		bars    []*plotter.BarChart
		err     error
	)
	if c.Kind == Lines {
		entries, err = drawLines(p, c, xs, series)
	} else {
		entries, bars, err = drawBars(p, xs, series)
	}
	if err != nil {
		return chartLayout{}, err
	}
	if logY && lo > 0 {
		p.Y.Scale = clampedLog{}
		p.Y.Tick.Marker = logTicks{}
		// At least a factor of 2 below the lowest value: a bar of
		// exactly a power of ten would otherwise have no height.
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo/2)))
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi*1.01)))
	} else {
		p.Y.Min = 0
		p.Y.Max = hi * 1.05 // the tallest bar does not touch the title
		p.Y.Tick.Marker = commaTicks{}
	}
	return saveWithLegend(p, len(xs), entries, bars, w, format)
}

// SmokeTitle is the line a chart measured with --quick adds to its title.
const SmokeTitle = "smoke run (--quick): not for comparison"

// maxLinearSpan is the largest ratio of the highest to the lowest value
// drawn on a linear Y axis: beyond it the lowest bars would be a few
// pixels tall, or vanish.
const maxLinearSpan = 30

// chartSize is the image size for nx X categories and the legend of
// entries, and the width of the plot left of the legend.
func chartSize(p *plot.Plot, nx int, entries []legendEntry) (size vg.Point, plotW vg.Length) {
	plotW = vg.Length(max(16, 4+2*nx)) * vg.Centimeter
	return vg.Point{X: plotW + legendWidth(p.Legend.TextStyle, entries), Y: 12 * vg.Centimeter}, plotW
}

// saveWithLegend draws p on the left of the image and its legend in a
// column on the right (see layoutChart).
func saveWithLegend(p *plot.Plot, nx int, entries []legendEntry, bars []*plotter.BarChart, w io.Writer, format string) (chartLayout, error) {
	size, plotW := chartSize(p, nx, entries)
	width, height := size.X, size.Y
	var canvas vg.CanvasWriterTo
	switch format {
	case "svg":
		canvas = vgsvg.New(width, height)
	case "png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(width, height)}
	default:
		return chartLayout{}, fmt.Errorf("unknown chart format %q", format)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Path())
	l := layoutChart(p, dc, plotW, entries, bars)
	p.Draw(draw.Crop(dc, 0, plotW-width, 0, 0))
	drawLegend(dc, p.Legend.TextStyle, l, entries)
	if _, err := canvas.WriteTo(w); err != nil {
		return chartLayout{}, fmt.Errorf("write %s: %w", format, err)
	}
	return l, nil
}

// drawBars adds a bar chart per series to p; layoutChart sizes and places
// the bars once the data area is known.
func drawBars(p *plot.Plot, xs []string, series []chartSeries) ([]legendEntry, []*plotter.BarChart, error) {
	var (
		entries []legendEntry
		bars    []*plotter.BarChart
	)
	for i, s := range series {
		vals := make(plotter.Values, len(xs))
		for j, x := range xs {
			vals[j] = s.values[x]
		}
		b, err := plotter.NewBarChart(vals, vg.Points(1))
		if err != nil {
			return nil, nil, fmt.Errorf("series %s: %w", s.name, err)
		}
		b.LineStyle.Width = 0
		b.Color = seriesColor(s, i)
		p.Add(b)
		bars = append(bars, b)
		entries = append(entries, legendEntry{s.name, []plot.Thumbnailer{b}})
	}
	p.NominalX(xs...)
	return entries, bars, nil
}

func drawLines(p *plot.Plot, c *Chart, xs []string, series []chartSeries) ([]legendEntry, error) {
	num := make(map[string]float64, len(xs))
	var entries []legendEntry
	for _, x := range xs {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return nil, fmt.Errorf("line chart needs a numeric %s, got %q", c.X, x)
		}
		num[x] = v
	}
	for i, s := range series {
		var pts plotter.XYs
		for _, x := range xs {
			if v, ok := s.values[x]; ok && v > 0 {
				pts = append(pts, plotter.XY{X: num[x], Y: v})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", s.name, err)
		}
		col := seriesColor(s, i)
		l.Color, sc.Color = col, col
		l.Dashes = lineDashes(i)
		if s.published {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, sc)
		entries = append(entries, legendEntry{s.name, []plot.Thumbnailer{l, sc}})
	}
	if c.LogX {
		// Ticks at the measured X values: every point has its label.
		ticks := make(plot.ConstantTicks, 0, len(xs))
		for _, x := range xs {
			ticks = append(ticks, plot.Tick{Value: num[x], Label: formatValue(num[x])})
		}
		p.X.Scale = clampedLog{}
		p.X.Tick.Marker = ticks
	}
	return entries, nil
}

// seriesColor gives the published figures one fixed grey, so that they
// read as the reference on every chart; when each measured series has its
// own, they take a paler shade of its colour.
func seriesColor(s chartSeries, i int) color.Color {
	switch {
	case s.published && s.of < 0:
		return color.Gray{Y: 150}
	case s.published:
		c := paletteColor(s.of)
		pale := func(v uint8) uint8 { return uint8((int(v) + 255) / 2) }
		return color.RGBA{R: pale(c.R), G: pale(c.G), B: pale(c.B), A: 255}
	}
	return paletteColor(i)
}

// clampedLog is a log scale that draws values below the axis minimum at
// the minimum, so that bars (which start at 0) can sit on a log axis.
type clampedLog struct{}

func (clampedLog) Normalize(lo, hi, x float64) float64 {
	lo = math.Max(lo, math.SmallestNonzeroFloat64)
	hi = math.Max(hi, lo)
	x = math.Max(x, lo)
	if hi == lo {
		return 0
	}
	return (math.Log(x) - math.Log(lo)) / (math.Log(hi) - math.Log(lo))
}

// commaTicks labels a linear axis with thousands separators.
type commaTicks struct{}

func (commaTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = formatValue(ts[i].Value)
		}
	}
	return ts
}

// logTicks marks a log axis at 1, 2 and 5 times each power of ten and
// labels them with the table's number format; when the axis spans more
// than three decades only the powers of ten are labelled, so that labels
// never crowd. The data's own extremes are labelled too when the axis
// spans less than a decade, so that every axis has at least two labels.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	decades := math.Log10(hi) - math.Log10(lo)
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for m := 1; m <= 9; m++ {
			v := float64(m) * base
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (decades <= 3 && (m == 2 || m == 5)) {
				t.Label = formatValue(v)
			}
			ts = append(ts, t)
		}
	}
	labelled := 0
	for _, t := range ts {
		if t.Label != "" {
			labelled++
		}
	}
	if labelled < 2 {
		ts = append(ts, plot.Tick{Value: lo, Label: formatValue(lo)}, plot.Tick{Value: hi, Label: formatValue(hi)})
	}
	return ts
}

// Directions a chart or a row can be better in.
const (
	HigherBetter = "higher is better"
	LowerBetter  = "lower is better"
)

// better returns c.Better, or the direction its unit implies.
func (c *Chart) better() string {
	switch c.Better {
	case "-":
		return ""
	case "":
		return betterFor(c.Unit)
	}
	return c.Better
}

// betterFor is the direction a unit implies: rates are better high, times
// and costs per operation low; "" when the unit does not say.
func betterFor(unit string) string {
	switch {
	case strings.HasSuffix(unit, "/s"):
		return HigherBetter
	case unit == "s" || unit == "ms" || unit == "µs" || strings.HasSuffix(unit, "/op") || strings.HasPrefix(unit, "MB peak"):
		return LowerBetter
	}
	return ""
}
