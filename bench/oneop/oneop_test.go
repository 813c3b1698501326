package oneop

import (
	"strings"
	"testing"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
)

// The quick run measures every row against an embedded server: each
// operation's throughput and its three latency percentiles, and the
// ratios to the ceilings. Run fails unless the server wrote exactly the
// records whose inserts were acknowledged, and every read found its
// record.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	x := &Experiment{Clients: 4, Records: 1000}
	res, env := labtest.Run(t, x)
	labtest.CheckResult(t, x, res)
	ops := labtest.Rows(res, "operations/s")
	for _, op := range []string{"get", "health", "search", "echo", "write", "write shared", "mix"} {
		if r, ok := ops[op]; !ok || r.Median <= 0 {
			t.Errorf("row %q: %+v", op, r)
		}
		for _, p := range []string{"p50", "p99", "p999"} {
			r, ok := labtest.Rows(res, "µs, "+p)[op+" "+p]
			if !ok || r.Median <= 0 {
				t.Errorf("row %q: %+v", op+" "+p, r)
			}
		}
	}
	for _, want := range []string{"get ÷ health", "search ÷ echo"} {
		if !hasNote(res.Notes, want) {
			t.Errorf("no note %q in %q", want, res.Notes)
		}
	}
	if !env.Targets()[0].Sync {
		t.Error("the lab's embedded server does not sync: the write rows would not be durable")
	}
}

// Latencies are ordered within a run: p50 ≤ p99 ≤ p999.
func TestQuickRunPercentilesOrdered(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	x := &Experiment{Clients: 2, Records: 100}
	res, _ := labtest.Run(t, x)
	for _, op := range []string{"get", "write"} {
		p50 := labtest.Rows(res, "µs, p50")[op+" p50"].Median
		p99 := labtest.Rows(res, "µs, p99")[op+" p99"].Median
		p999 := labtest.Rows(res, "µs, p999")[op+" p999"].Median
		if p50 > p99 || p99 > p999 {
			t.Errorf("%s: p50 %v p99 %v p999 %v", op, p50, p99, p999)
		}
	}
}

func hasNote(notes []string, prefix string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// Flags out of range are refused before anything starts.
func TestDefaultsRefuse(t *testing.T) {
	for _, x := range []*Experiment{{Clients: 0, Records: 10}, {Clients: 1001, Records: 10}, {Clients: 1, Records: -1}} {
		if err := x.defaults(false); err == nil {
			t.Errorf("%+v accepted", x)
		}
	}
}

// A --postgres that is no connection string, or names a server that does
// not answer, fails the run with an error naming what failed and never
// the password.
func TestPostgresErrorsHideThePassword(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	for _, dsn := range []string{"postgres://bench:s3cret@127.0.0.1:1/bench?sslmode=disable", "postgres://bench:s3cret@[::1/%zz"} {
		x := &Experiment{Clients: 1, Records: 10, Postgres: dsn}
		_, err := bench.Run(t.Context(), x, labtest.Options(), nil)
		if err == nil {
			t.Fatalf("%q: run succeeded", dsn)
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "postgres") && !strings.Contains(err.Error(), "PostgreSQL") {
			t.Errorf("%q: error %q", dsn, err)
		}
	}
}
