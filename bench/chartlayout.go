package bench

import (
	"errors"
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// legendEntry is one series' line of the legend.
type legendEntry struct {
	name   string
	thumbs []plot.Thumbnailer
}

// legendBox is where one legend entry is drawn: its thumbnail and its text.
type legendBox struct {
	icon, text vg.Rectangle
}

// chartLayout is where render puts each part of a chart, in the image's
// coordinates, so that a test can hold them against each other.
type chartLayout struct {
	size   vg.Point
	title  vg.Rectangle // the title's lines
	data   vg.Rectangle // the plot's data area, inside the axes
	legend []legendBox
	bars   []vg.Rectangle // each drawn bar's box (bar charts)
}

// Legend geometry: the column's margin left of the entries, the thumbnail
// width and the gap between a thumbnail and its text, and the space
// between entries on top of the font's line height.
var (
	legendMargin = vg.Points(10)
	legendThumb  = vg.Points(20)
	legendGap    = vg.Points(4)
	legendSpace  = vg.Points(3)
)

// legendWidth is the width of the legend column.
func legendWidth(sty draw.TextStyle, entries []legendEntry) vg.Length {
	var w vg.Length
	for _, e := range entries {
		w = max(w, sty.Width(e.name))
	}
	return legendMargin + legendThumb + legendGap + w + legendMargin
}

// layoutChart places p's parts on a canvas of size: the plot left of
// plotW, the legend in a column right of it, its first entry level with
// the top of the data area and each entry a full line below the one
// before. bars, if any, are sized here: a category's bars take at most
// 80% of its width, so that they stay inside the data area and apart from
// the next category's.
func layoutChart(p *plot.Plot, dc draw.Canvas, plotW vg.Length, entries []legendEntry, bars []*plotter.BarChart) chartLayout {
	l := chartLayout{size: dc.Size()}
	plotC := draw.Crop(dc, 0, plotW-dc.Size().X, 0, 0)
	if len(bars) > 0 {
		nx := len(bars[0].Values)
		p.X.Min, p.X.Max = -0.5, float64(nx)-0.5
		data := p.DataCanvas(plotC)
		group := min(vg.Points(60), 0.8*data.Size().X/vg.Length(nx))
		w := group / vg.Length(len(bars))
		for i, b := range bars {
			b.Width = w
			b.Offset = w * vg.Length(float64(i)-float64(len(bars)-1)/2)
		}
	}
	data := p.DataCanvas(plotC)
	l.data = data.Rectangle
	if p.Title.Text != "" {
		h := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y
		tw := p.Title.TextStyle.Width(p.Title.Text)
		cx := plotC.Center().X
		l.title = vg.Rectangle{Min: vg.Point{X: cx - tw/2, Y: plotC.Max.Y - h}, Max: vg.Point{X: cx + tw/2, Y: plotC.Max.Y}}
	}
	for _, b := range bars {
		for i, v := range b.Values {
			if v <= 0 {
				continue // no bar: the series has no value here
			}
			x := data.X(p.X.Norm(b.XMin+float64(i))) + b.Offset
			y := data.Y(p.Y.Norm(v))
			l.bars = append(l.bars, vg.Rectangle{
				Min: vg.Point{X: x - b.Width/2, Y: data.Min.Y},
				Max: vg.Point{X: x + b.Width/2, Y: max(y, data.Min.Y)},
			})
		}
	}
	sty := p.Legend.TextStyle
	ext := sty.FontExtents()
	line := ext.Height + legendSpace
	top := l.data.Max.Y
	for i, e := range entries {
		y0 := top - vg.Length(i+1)*line
		x := plotW + legendMargin
		h := ext.Ascent + ext.Descent
		l.legend = append(l.legend, legendBox{
			icon: vg.Rectangle{Min: vg.Point{X: x, Y: y0}, Max: vg.Point{X: x + legendThumb, Y: y0 + h}},
			text: vg.Rectangle{Min: vg.Point{X: x + legendThumb + legendGap, Y: y0}, Max: vg.Point{X: x + legendThumb + legendGap + sty.Width(e.name), Y: y0 + h}},
		})
	}
	return l
}

// drawLegend draws entries in the boxes l placed them in.
func drawLegend(dc draw.Canvas, sty draw.TextStyle, l chartLayout, entries []legendEntry) {
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YBottom
	descent := sty.FontExtents().Descent
	for i, e := range entries {
		b := l.legend[i]
		icon := draw.Canvas{Canvas: dc.Canvas, Rectangle: b.icon}
		for _, t := range e.thumbs {
			t.Thumbnail(&icon)
		}
		// YBottom puts the line's descent below the point: the box's
		// bottom is the descent's bottom.
		dc.FillText(sty, vg.Point{X: b.text.Min.X, Y: b.text.Min.Y + descent}, e.name)
	}
}

// chartPalette is a colour for each of up to twelve measured series, each
// distinct from the others and from the published figures' grey.
var chartPalette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 255}, // blue
	{0xff, 0x7f, 0x0e, 255}, // orange
	{0x2c, 0xa0, 0x2c, 255}, // green
	{0xd6, 0x27, 0x28, 255}, // red
	{0x94, 0x67, 0xbd, 255}, // purple
	{0x8c, 0x56, 0x4b, 255}, // brown
	{0xe3, 0x77, 0xc2, 255}, // pink
	{0xbc, 0xbd, 0x22, 255}, // olive
	{0x17, 0xbe, 0xcf, 255}, // cyan
	{0x39, 0x3b, 0x79, 255}, // navy
	{0x63, 0x79, 0x39, 255}, // moss
	{0x84, 0x3c, 0x39, 255}, // maroon
}

// paletteColor is series i's colour; past the palette's end, colours
// repeat (line charts then tell series apart by dashes, see lineDashes).
func paletteColor(i int) color.RGBA { return chartPalette[i%len(chartPalette)] }

// lineDashes gives series i a dash pattern once the palette has been used
// up once, so that no two lines of a chart look alike.
func lineDashes(i int) []vg.Length {
	switch (i / len(chartPalette)) % 3 {
	case 1:
		return []vg.Length{vg.Points(1), vg.Points(2)}
	case 2:
		return []vg.Length{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}
	}
	return nil
}

// CheckChartLayout draws res's chart and reports every part of it that is
// out of place: a legend entry overlapping another, the title or the data
// area; a title over the data; a part outside the image; a bar outside the
// data area, over another bar, or too short to see (under 3% of the
// axis); a data area squeezed by its axes' labels.
func CheckChartLayout(res *Result) error {
	l, err := renderLayout(res, io.Discard, "svg")
	if err != nil {
		return err
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	image := vg.Rectangle{Max: l.size}
	if l.data.Size().Y < l.size.Y*2/3 || l.data.Size().X < l.size.X/2 {
		add("data area %v is squeezed in an image %v: an axis label is longer than its axis", l.data.Size(), l.size)
	}
	if overlaps(l.title, l.data) {
		add("title %v overlaps the data area %v", l.title, l.data)
	}
	if !inside(l.title, image) {
		add("title %v is outside the image %v", l.title, image)
	}
	for i, e := range l.legend {
		for _, box := range []vg.Rectangle{e.icon, e.text} {
			switch {
			case !inside(box, image):
				add("legend entry %d %v is outside the image %v", i, box, image)
			case overlaps(box, l.title):
				add("legend entry %d %v overlaps the title %v", i, box, l.title)
			case overlaps(box, l.data):
				add("legend entry %d %v overlaps the data area %v", i, box, l.data)
			}
			for j, f := range l.legend[i+1:] {
				if overlaps(box, f.icon) || overlaps(box, f.text) {
					add("legend entries %d and %d overlap", i, i+1+j)
				}
			}
		}
	}
	for i, b := range l.bars {
		switch {
		case !inside(b, l.data):
			add("bar %d %v leaves the data area %v", i, b, l.data)
		case b.Size().Y < l.data.Size().Y*3/100:
			add("bar %d is %.1f points tall on an axis of %.1f: it vanishes", i, b.Size().Y, l.data.Size().Y)
		}
		for j, c := range l.bars[i+1:] {
			if overlaps(b, c) {
				add("bars %d and %d overlap", i, i+1+j)
			}
		}
	}
	return errors.Join(errs...)
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

func inside(a, b vg.Rectangle) bool {
	return a.Min.X >= b.Min.X && a.Max.X <= b.Max.X && a.Min.Y >= b.Min.Y && a.Max.Y <= b.Max.Y
}
