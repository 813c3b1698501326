package bench

import (
	"fmt"
	"slices"
	"strings"
)

// QuickNote is the note Env.Run adds to a result measured with --quick;
// the report recognises quick results by it.
const QuickNote = "quick mode: short runs on small data; for smoke checks, not for comparison"

// PublishedMeaning says, for the report's reader, what a "published"
// figure is.
const PublishedMeaning = `"Published" is the figure the experiment's seed reported: the write-up of ` +
	`the same experiment that Protobase's design rests on, run on its author's machine ` +
	`(named in each section). "Ratio" is measured/published. The machines differ, so a ` +
	`ratio says whether the shape holds, not which machine is faster.`

// BenchmarksDoc is where the report sends its reader for how the lab works.
const BenchmarksDoc = "https://github.com/protobase/protobase/blob/main/docs/benchmarks.md"

// isQuick reports whether res was measured with --quick.
func isQuick(res *Result) bool {
	return slices.Contains(res.Notes, QuickNote)
}

// question is what res's experiment asks: its Describe line when it is
// registered, else its name.
func question(res *Result) string {
	if x, err := Lookup(res.Experiment); err == nil {
		return x.Describe()
	}
	return res.Experiment
}

// answer says in one sentence what res measured: its best row in the
// chart's unit, and how far its figures are from the published ones.
func answer(res *Result) string {
	unit, better := "", HigherBetter
	if res.Chart != nil {
		unit = res.Chart.Unit
		if b := res.Chart.better(); b != "" {
			better = b
		}
	}
	var best *Row
	var ratios []float64
	for i := range res.Rows {
		r := &res.Rows[i]
		if unit != "" && r.Unit != unit {
			continue
		}
		if best == nil || (better == HigherBetter) == (r.Median > best.Median) {
			best = r
		}
		if r.Reference != nil && r.Reference.Value > 0 {
			ratios = append(ratios, r.Ratio())
		}
	}
	if best == nil {
		return "no rows were measured."
	}
	word := "fastest"
	if better == LowerBetter {
		word = "cheapest"
	}
	s := fmt.Sprintf("%s was %s at %s %s", best.Name, word, formatValue(best.Median), best.Unit)
	if worst := worstBeside(res, *best, better); worst != nil && worst.Median > 0 && best.Median > 0 {
		if better == HigherBetter {
			s += fmt.Sprintf(", %s× %s", formatValue(best.Median/worst.Median), worst.Name)
		} else {
			s += fmt.Sprintf(", %s× less than %s", formatValue(worst.Median/best.Median), worst.Name)
		}
	}
	if len(ratios) > 0 {
		lo, hi := slices.Min(ratios), slices.Max(ratios)
		if len(ratios) == 1 {
			s += fmt.Sprintf("; measured/published was %s× on the one row with a published figure", formatValue(lo))
		} else {
			s += fmt.Sprintf("; measured/published ranged %s–%s× over %d rows", formatValue(lo), formatValue(hi), len(ratios))
		}
	}
	if isQuick(res) {
		s += " (smoke figures)"
	}
	return s + "."
}

// Flag is one suspicious ordering: the rows involved and what is wrong,
// in words.
type Flag struct {
	Rows []string
	Text string
}

// Flags lists, in words, the orderings in res a reader should not take at
// face value: a larger batch slower than a smaller one of the same
// configuration, and a share of a ceiling (unit "× …", at most 1 by
// construction) above 1.
func Flags(res *Result) []Flag {
	var flags []Flag
	advice := "compare their min–max spreads, and rerun before trusting the ordering."
	if isQuick(res) {
		advice = "in a smoke run this is most likely noise; do not read it as a result."
	}
	groups := map[string][]Row{}
	var order []string
	for _, r := range res.Rows {
		if _, ok := batchOf(r); !ok || betterFor(r.Unit) != HigherBetter {
			continue
		}
		k := r.Unit + "|" + paramsWithout(r.Params, "batch")
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	for _, k := range order {
		rows := groups[k]
		for i, small := range rows {
			bs, _ := batchOf(small)
			for _, large := range rows[i+1:] {
				bl, _ := batchOf(large)
				if bl > bs && large.Median < small.Median && !flaggedPair(flags, large.Name, small.Name) {
					flags = append(flags, Flag{Rows: []string{large.Name, small.Name}, Text: fmt.Sprintf("%s (%s %s) is slower than %s (%s %s): a larger batch should not be slower; %s",
						large.Name, formatValue(large.Median), large.Unit, small.Name, formatValue(small.Median), small.Unit, advice)})
				}
			}
		}
	}
	for _, r := range res.Rows {
		if strings.HasPrefix(r.Unit, "×") && r.Median > 1 {
			flags = append(flags, Flag{Rows: []string{r.Name}, Text: fmt.Sprintf("%s is %s %s, above its ceiling of 1: the two runs it divides were not comparable (noise or a busy machine).",
				r.Name, formatValue(r.Median), r.Unit)})
		}
	}
	return flags
}

// batchOf returns r's "batch" param as a number.
func batchOf(r Row) (float64, bool) {
	switch v := r.Params["batch"].(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// paramsWithout renders params other than skip as a sorted key=value list.
func paramsWithout(params map[string]any, skip string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if k != skip {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + paramString(params[k])
	}
	return strings.Join(parts, ",")
}

// sources lists the distinct sources of res's published figures.
func sources(res *Result) []string {
	var s []string
	for _, r := range res.Rows {
		if r.Reference != nil && !slices.Contains(s, r.Reference.Source) {
			s = append(s, r.Reference.Source)
		}
	}
	return s
}

// flaggedPair reports whether flags already has one for rows a and b (the
// same pair in another unit, such as MB/s beside records/s).
func flaggedPair(flags []Flag, a, b string) bool {
	return slices.ContainsFunc(flags, func(f Flag) bool {
		return len(f.Rows) == 2 && f.Rows[0] == a && f.Rows[1] == b
	})
}

// worstBeside returns the worst row in best's unit and chart series (all
// rows of the unit when the chart has no series), or nil when best is
// alone: the answer's "how much does the configuration matter".
func worstBeside(res *Result, best Row, better string) *Row {
	series := ""
	if res.Chart != nil {
		series = res.Chart.Series
	}
	var worst *Row
	for i := range res.Rows {
		r := &res.Rows[i]
		if r.Unit != best.Unit || r.Name == best.Name || (series != "" && paramString(r.Params[series]) != paramString(best.Params[series])) {
			continue
		}
		if worst == nil || (better == HigherBetter) == (r.Median < worst.Median) {
			worst = r
		}
	}
	return worst
}
