// Package labtest is what the tests of the lab's experiments share: the
// shortest options that still measure, a Target for one test, an
// experiment run whose servers stay up for the test to read their
// counters, and the checks every result must pass. Only tests import it,
// so that the protobase binary does not link the testing package.
package labtest

import (
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/protobase/protobase/bench"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	"github.com/protobase/protobase/server"
)

// Options are --quick with one short run and no warm-up, to keep tests
// that start servers cheap.
func Options() bench.Options {
	o := bench.QuickOptions()
	o.Runs, o.Duration, o.Warmup = 1, 30*time.Millisecond, 0
	return o
}

// Target starts an embedded lab server (bench.StartTarget, as the lab
// does) and closes it when the test ends.
func Target(t testing.TB, cfg bench.TargetConfig) *bench.Target {
	t.Helper()
	tg, err := bench.StartTarget(t.Context(), "", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tg.Close(); err != nil {
			t.Error(err)
		}
	})
	return tg
}

// ItemTarget is Target with the lab's item schema applied, as the
// experiments' benchmarks start.
func ItemTarget(t testing.TB, cfg bench.TargetConfig) *bench.Target {
	t.Helper()
	tg := Target(t, cfg)
	if err := tg.EnsureSchema(t.Context(), bench.ItemSchema()); err != nil {
		t.Fatal(err)
	}
	return tg
}

// Env returns an Env with opts that is closed when the test ends.
func Env(t testing.TB, opts bench.Options) *bench.Env {
	t.Helper()
	env := bench.NewEnv(opts, nil)
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	return env
}

// Run runs x with Options and returns its result and the Env, whose
// servers stay up until the test ends (env.Targets, in the order the
// experiment started them).
func Run(t testing.TB, x bench.Experiment) (*bench.Result, *bench.Env) {
	t.Helper()
	env := Env(t, Options())
	res, err := env.Run(t.Context(), x)
	if err != nil {
		t.Fatal(err)
	}
	return res, env
}

// CheckResult checks what every experiment's result must be: stamped with
// the experiment, the machine and the start time; rows of one run each
// with a unit, a positive median inside its spread; and a chart that
// draws with its parts apart (bench.CheckChartLayout).
func CheckResult(t testing.TB, x bench.Experiment, res *bench.Result) {
	t.Helper()
	if res.Experiment != x.Name() || res.Machine.CPUs == 0 || res.Started.IsZero() || res.Chart == nil || len(res.Rows) == 0 {
		t.Fatalf("result %+v", res)
	}
	for _, r := range res.Rows {
		if r.Runs != 1 || r.Median <= 0 || r.Min > r.Median || r.Median > r.Max || r.Unit == "" {
			t.Errorf("row %+v", r)
		}
	}
	if err := bench.Draw(res, filepath.Join(t.TempDir(), "c.png")); err != nil {
		t.Error(err)
	}
	if err := bench.CheckChartLayout(res); err != nil {
		t.Errorf("%s chart: %v", x.Name(), err)
	}
}

// Stats returns tg's server counters (through the lab API, as an
// experiment reads them).
func Stats(t testing.TB, tg *bench.Target) *labv1.StatsResponse {
	t.Helper()
	st, err := tg.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Rows returns the rows of res with the given unit, by name.
func Rows(res *bench.Result, unit string) map[string]bench.Row {
	out := map[string]bench.Row{}
	for _, r := range res.Rows {
		if r.Unit == unit {
			out[r.Name] = r
		}
	}
	return out
}

// EtcdEmpty fails the test unless the etcd cluster of e holds no key
// under prefix: what the lab's servers and bare clients wrote there was
// dropped.
func EtcdEmpty(t testing.TB, e server.EtcdConfig, prefix string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d keys left under %s after the run", resp.Count, prefix)
	}
}
