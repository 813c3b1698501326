package bench

import (
	"math"
	"slices"
)

// Summary is the centre and spread of a set of samples. Invariant for a
// non-empty set: Min ≤ Median ≤ Max.
type Summary struct {
	Median, Min, Max float64
	N                int
}

// Summarize returns the median, min and max of xs (the median of an even
// count is the mean of the two middle values). NaN samples are ignored; an
// empty set gives the zero Summary.
func Summarize(xs []float64) Summary {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return Summary{}
	}
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Summary{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// NewRow builds a row from one configuration's per-run samples.
func NewRow(name string, params map[string]any, unit string, samples []float64, ref *Reference) Row {
	s := Summarize(samples)
	if params == nil {
		params = map[string]any{}
	}
	return Row{Name: name, Params: params, Unit: unit, Median: s.Median, Min: s.Min, Max: s.Max, Runs: s.N, Reference: ref}
}
