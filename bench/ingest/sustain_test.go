package ingest

import (
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/bench/labtest"
)

// A sustained run reports, per index count, its first-second, last-second
// and overall rates and their ratio, all from acknowledged records.
func TestSustainedRunReportsRates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and measures")
	}
	g := &Experiment{Batches: []int{100}, Sustain: minSustain}
	res, _ := labtest.Run(t, g)
	labtest.CheckResult(t, g, res)
	for _, indexes := range []string{"0", "2"} {
		name := "sustained 2s indexes=" + indexes + " sync=on batch=100"
		first := labtest.Rows(res, "records/s, first second")[name]
		last := labtest.Rows(res, "records/s, last second")[name]
		whole := labtest.Rows(res, "records/s, overall")[name]
		ratio := labtest.Rows(res, "overall / first second")[name]
		if first.Median <= 0 || last.Median <= 0 || whole.Median <= 0 {
			t.Fatalf("%s: rates %v %v %v", name, first, last, whole)
		}
		if r := whole.Median / first.Median; r < ratio.Median*0.999 || r > ratio.Median*1.001 {
			t.Errorf("%s: ratio %v, rates give %v", name, ratio.Median, r)
		}
	}
}

func TestSustainRefusesShortRuns(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Nanosecond, minSustain - 1} {
		g := &Experiment{Batches: []int{100}, Sustain: d}
		env := labtest.Env(t, labtest.Options())
		_, err := env.Run(t.Context(), g)
		if err == nil || !strings.Contains(err.Error(), "--sustain") {
			t.Errorf("--sustain %s: %v", d, err)
		}
	}
}

func TestAckTraceRates(t *testing.T) {
	var tr ackTrace
	if f, l, w := tr.rates(); f != 0 || l != 0 || w != 0 {
		t.Fatalf("empty trace: %v %v %v", f, l, w)
	}
	// 1,000 records every 100 ms for 0.5 s, then 500 every 100 ms.
	var n uint64
	for i := 1; i <= 30; i++ {
		if i <= 5 {
			n += 1000
		} else {
			n += 500
		}
		tr.add(time.Duration(i)*100*time.Millisecond, n)
	}
	f, l, w := tr.rates()
	if want := float64(n) / 3; f != 7500 || l != 5000 || w < want-1e-6 || w > want+1e-6 {
		t.Fatalf("rates %v %v %v, want 7500 5000 %v", f, l, w, want)
	}
}
