package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
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
	case len(refs) == 1:
		for _, v := range refs {
			series = append(series, chartSeries{name: publishedSeries, values: v, of: -1, published: true})
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

// Draw renders res's chart to path (.png or .svg, by extension). Log
// scales are used when asked and, for Y, whenever the values span more
// than two decades.
func Draw(res *Result, path string) error {
	if err := CheckChartPath(path); err != nil {
		return err
	}
	c := res.Chart
	if c == nil {
		return fmt.Errorf("%s: experiment %s has no chart", path, res.Experiment)
	}
	xs, series := chartData(c, res.Rows)
	if len(xs) == 0 {
		return fmt.Errorf("%s: no rows to draw", path)
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	logY := c.LogY || (lo > 0 && hi/lo > 100)

	var err error
	if c.Kind == Lines {
		err = drawLines(p, c, xs, series)
	} else {
		err = drawBars(p, xs, series)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if logY && lo > 0 {
		floor := math.Pow(10, math.Floor(math.Log10(lo)))
		p.Y.Scale = clampedLog{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = floor
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi*1.01)))
	} else {
		p.Y.Min = 0
		p.Y.Tick.Marker = commaTicks{}
	}
	width := vg.Length(max(16, 4+2*len(xs))) * vg.Centimeter
	if err := p.Save(width, 12*vg.Centimeter, path); err != nil {
		return fmt.Errorf("save chart %s: %w", path, err)
	}
	return nil
}

func drawBars(p *plot.Plot, xs []string, series []chartSeries) error {
	n := len(series)
	w := vg.Points(max(4, 60/float64(n)))
	for i, s := range series {
		vals := make(plotter.Values, len(xs))
		for j, x := range xs {
			vals[j] = s.values[x]
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return fmt.Errorf("series %s: %w", s.name, err)
		}
		b.LineStyle.Width = 0
		b.Color = seriesColor(s, i)
		b.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(b)
		p.Legend.Add(s.name, b)
	}
	p.NominalX(xs...)
	return nil
}

func drawLines(p *plot.Plot, c *Chart, xs []string, series []chartSeries) error {
	num := make(map[string]float64, len(xs))
	for _, x := range xs {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return fmt.Errorf("line chart needs a numeric %s, got %q", c.X, x)
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
			return fmt.Errorf("series %s: %w", s.name, err)
		}
		col := seriesColor(s, i)
		l.Color, sc.Color = col, col
		if s.published {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, sc)
		p.Legend.Add(s.name, l, sc)
	}
	if c.LogX {
		p.X.Scale = clampedLog{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	return nil
}

// seriesColor gives the published figures one fixed grey, so that they
// read as the reference on every chart; when each measured series has its
// own, they take a paler shade of its colour.
func seriesColor(s chartSeries, i int) color.Color {
	switch {
	case s.published && s.of < 0:
		return color.Gray{Y: 150}
	case s.published:
		r, g, b, _ := plotutil.Color(s.of).RGBA()
		pale := func(v uint32) uint8 { return uint8((v>>8 + 255) / 2) }
		return color.RGBA{R: pale(r), G: pale(g), B: pale(b), A: 255}
	}
	return plotutil.Color(i)
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
