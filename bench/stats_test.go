package bench

import (
	"math"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name string
		in   []float64
		want Summary
	}{
		{"empty", nil, Summary{}},
		{"one", []float64{3}, Summary{Median: 3, Min: 3, Max: 3, N: 1}},
		{"odd, unsorted", []float64{5, 1, 3}, Summary{Median: 3, Min: 1, Max: 5, N: 3}},
		{"even: mean of the middle two", []float64{4, 1, 3, 10}, Summary{Median: 3.5, Min: 1, Max: 10, N: 4}},
		{"outlier does not move the median", []float64{10, 11, 12, 13, 1e9}, Summary{Median: 12, Min: 10, Max: 1e9, N: 5}},
		{"NaN ignored", []float64{nan, 2, 4}, Summary{Median: 3, Min: 2, Max: 4, N: 2}},
		{"only NaN", []float64{nan}, Summary{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			got := Summarize(in)
			if got != tc.want {
				t.Fatalf("Summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
			for i := range in { // the input is not reordered
				if !(in[i] == tc.in[i] || math.IsNaN(in[i]) && math.IsNaN(tc.in[i])) {
					t.Fatalf("input changed: %v", in)
				}
			}
		})
	}
}

func TestNewRowAndRatio(t *testing.T) {
	r := NewRow("x", nil, "op/s", []float64{30, 10, 20}, &Reference{Value: 10, Source: "s"})
	if r.Median != 20 || r.Min != 10 || r.Max != 30 || r.Runs != 3 || r.Params == nil {
		t.Fatalf("row %+v", r)
	}
	if r.Ratio() != 2 {
		t.Fatalf("ratio %v", r.Ratio())
	}
	if (Row{Median: 5}).Ratio() != 0 {
		t.Fatal("ratio without reference")
	}
}

func TestFormatValue(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{0.0123456, "0.0123"},
		{4.5, "4.5"},
		{999, "999"},
		{9482, "9,480"},
		{1939291, "1,940,000"},
		{-123456, "-123,000"},
		{math.Inf(1), "+Inf"},
	}
	for _, tc := range cases {
		if got := formatValue(tc.in); got != tc.want {
			t.Errorf("formatValue(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := DefaultOptions()
	cases := []struct {
		name string
		mod  func(*Options)
		bad  bool
	}{
		{"defaults", func(*Options) {}, false},
		{"quick", func(o *Options) { *o = QuickOptions() }, false},
		{"zero runs", func(o *Options) { o.Runs = 0 }, true},
		{"too many runs", func(o *Options) { o.Runs = 1001 }, true},
		{"zero duration", func(o *Options) { o.Duration = 0 }, true},
		{"huge duration", func(o *Options) { o.Duration = 2 * time.Hour }, true},
		{"negative warm-up", func(o *Options) { o.Warmup = -time.Second }, true},
		{"no warm-up", func(o *Options) { o.Warmup = 0 }, false},
	}
	for _, tc := range cases {
		o := ok
		tc.mod(&o)
		if err := o.Validate(); (err != nil) != tc.bad {
			t.Errorf("%s: Validate() = %v, want error %v", tc.name, err, tc.bad)
		}
	}
}

// The response tally counts what a SearchResponse carries without
// decoding it into messages.
func TestSearchTally(t *testing.T) {
	b := appendTestResponse(nil, 3)
	var tl searchTally
	if err := tl.add(b); err != nil {
		t.Fatal(err)
	}
	if tl.done != 3 || tl.records != 3 || tl.errors != 0 || tl.responses != 1 {
		t.Fatalf("tally %+v", tl)
	}
	if err := tl.add([]byte{0x0a, 0x05}); err == nil {
		t.Fatal("truncated response accepted")
	}
}
