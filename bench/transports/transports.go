// Package transports is the lab's transports experiment (seed 002): what
// one service hop costs, from an HTTP front answering in-process or over
// gRPC, HTTP/2 JSON or NATS, under a wrk-style load.
package transports

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/bench"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
)

func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }

// Transport modes: how the front gets a record.
const (
	modeDirect     = "direct"      // in-process engine.Query, no hop
	modeDirectGet  = "direct-get"  // in-process engine.Get, no hop
	modeGRPC       = "grpc"        // unary Query over gRPC
	modeGRPCSearch = "grpc-search" // lookups multiplexed on one long-lived Search stream
	modeHTTP2      = "http2"       // Query as JSON through the REST gateway, h2c
	modeNATS       = "nats"        // PREFIX.get (engine.Get) over NATS request-reply
)

var allModes = []string{modeDirect, modeDirectGet, modeGRPC, modeGRPCSearch, modeHTTP2, modeNATS}

// baseline is the no-hop mode making the same engine call as a hop mode,
// so that their ratio is the hop's cost alone: a primary-key Query pays
// for compiling the query, engine.Get does not (see docs/transports.md).
func baseline(mode string) string {
	if mode == modeNATS {
		return modeDirectGet
	}
	return modeDirect
}

// isDirect reports whether mode answers in-process.
func isDirect(mode string) bool { return mode == modeDirect || mode == modeDirectGet }

// seed002 is seed 002's wrk report per mode (2 threads, 10 connections,
// 10 s, a MacBook): requests/s, average and max latency in ms, and
// transfer in MiB/s (wrk's MB are binary).
var seed002 = map[string]struct{ rps, avgMS, maxMS, mibps float64 }{
	modeDirect:    {10073.47, 0.99, 9.49, 3.52},
	modeDirectGet: {10073.47, 0.99, 9.49, 3.52},
	modeGRPC:      {7562.07, 1.34, 36.12, 2.64},
	// The seed had one gRPC mode; a stream is how we would make the hop.
	modeGRPCSearch: {7562.07, 1.34, 36.12, 2.64},
	modeHTTP2:      {4436.43, 2.73, 55.29, 1.55},
	modeNATS:       {1633.64, 6.14, 29.30, 583.90 / 1024},
}

const (
	seed002Source = "seed 002 (the cost of a gRPC call: wrk -t2 -c10 -d10s, Go services on a Mac laptop)"
	// seed002Duration is the length of the seed's wrk runs, used when
	// --duration is not given.
	seed002Duration = 10 * time.Second
)

// Experiment is seed 002: what one service hop costs. A front HTTP service
// answers GET /records/{id} with the record as JSON, either from an engine
// in its own process (direct; the one place the lab calls an engine
// without a transport, because no hop is the point) or one hop away on
// the lab server over gRPC, HTTP/2 JSON or NATS, under a wrk-style load of
// keep-alive HTTP/1.1 connections issuing requests back to back.
//
// The direct engine is a second embedded server holding the same records,
// so that the servers' counters tell the modes apart: each hop request
// must be exactly one point lookup on the lab server, each direct one a
// point lookup on the direct engine (checked after the runs).
type Experiment struct {
	Records     int
	Connections int
	Threads     int
	Modes       []string
	Driver      string // "builtin" or "wrk"
	// HTTPAddr and NATSURL locate an --addr server's REST gateway and
	// NATS service; without them, its http2 and nats modes are skipped.
	HTTPAddr, NATSURL, NATSPrefix string

	// runs collects every load run of the mode being measured, warm-up
	// included; Run keeps the last env.Runs, which are Measure's measured
	// runs.
	runs []runStats
	// requests counts, by mode, the requests the load completed over all
	// its runs, which the servers' counters must match (checked by the
	// tests).
	requests map[string]int64
}

// runStats is what one load run measured, by either driver.
type runStats struct {
	requests int64
	bytes    int64
	elapsed  time.Duration
	lat      latencySummary
}

// Name implements bench.Experiment.
func (*Experiment) Name() string { return "transports" }

// Describe implements bench.Experiment.
func (*Experiment) Describe() string {
	return "Cost of one service hop: an HTTP front answering directly or over gRPC, HTTP/2 JSON or NATS (seed 002)"
}

// Flags implements bench.Experiment.
func (x *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&x.Records, "records", 0, "records preloaded (0: 10000, 1000 with --quick)")
	fs.IntVar(&x.Connections, "connections", 10, "keep-alive HTTP/1.1 connections to the front, each issuing requests back to back")
	fs.IntVar(&x.Threads, "threads", 2, "wrk threads (--driver wrk); the built-in driver runs a goroutine per connection")
	fs.StringSliceVar(&x.Modes, "modes", nil, "modes to run (default direct,direct-get,grpc,grpc-search,http2,nats)")
	fs.StringVar(&x.Driver, "driver", "builtin", "load generator: builtin, or wrk (must be on PATH)")
	fs.StringVar(&x.HTTPAddr, "http-addr", "", "with --addr: the server's REST address (protobase serve --http-addr), for the http2 mode")
	fs.StringVar(&x.NATSURL, "nats-url", "", "with --addr: the NATS server the server serves on, for the nats mode")
	fs.StringVar(&x.NATSPrefix, "nats-prefix", bench.LabNATSPrefix, "with --addr: the server's NATS subject prefix")
}

func (x *Experiment) defaults(quick bool) error {
	if x.Records == 0 {
		x.Records = 10000
		if quick {
			x.Records = 1000
		}
	}
	if len(x.Modes) == 0 {
		x.Modes = allModes
	}
	// Zero values are the flags' defaults, for experiments built without
	// flags (bench all's tests, library callers).
	if x.Connections == 0 {
		x.Connections = 10
	}
	if x.Threads == 0 {
		x.Threads = min(2, x.Connections)
	}
	if x.Driver == "" {
		x.Driver = "builtin"
	}
	if x.NATSPrefix == "" {
		x.NATSPrefix = bench.LabNATSPrefix
	}
	switch {
	case x.Records < 1:
		return fmt.Errorf("--records must be at least 1, got %d", x.Records)
	case x.Connections < 1 || x.Connections > 10000:
		return fmt.Errorf("--connections must be in 1..10000, got %d", x.Connections)
	case x.Threads < 1 || x.Threads > x.Connections:
		return fmt.Errorf("--threads must be in 1..connections (%d), got %d", x.Connections, x.Threads)
	case x.Driver != "builtin" && x.Driver != "wrk":
		return fmt.Errorf("--driver must be builtin or wrk, got %q", x.Driver)
	}
	for _, m := range x.Modes {
		if !slices.Contains(allModes, m) {
			return fmt.Errorf("--modes: unknown mode %q (have %s)", m, strings.Join(allModes, ", "))
		}
	}
	// Direct first, whatever the order given: the hops' shares divide by it.
	var modes []string
	for _, m := range allModes {
		if slices.Contains(x.Modes, m) {
			modes = append(modes, m)
		}
	}
	x.Modes = modes
	return nil
}

// transportsLab is the servers and clients the modes share.
type transportsLab struct {
	hop    *bench.Target // the lab server: gRPC, REST and NATS
	direct *bench.Target // in-process engine of the direct mode; nil without it
	// restAddr, natsURL and natsPrefix locate the hop server's REST and
	// NATS fronts ("" when it has none).
	restAddr, natsURL, natsPrefix string
	// apiKey and tls are how the REST and NATS hops reach an --addr
	// server ("" and nil for the embedded one, which runs without auth).
	apiKey string
	tls    *tls.Config
}

// setup starts (or connects to) the hop server and, for the direct mode,
// an embedded one, and loads records into both.
func (x *Experiment) setup(ctx context.Context, env *bench.Env) (*transportsLab, error) {
	hop, err := env.Target(ctx, bench.TargetConfig{NoSync: true, HTTP: true, NATS: true})
	if err != nil {
		return nil, err
	}
	lab := &transportsLab{hop: hop, restAddr: hop.HTTPAddr, natsURL: hop.NATSURL, natsPrefix: hop.NATSPrefix}
	if !hop.Embedded {
		lab.restAddr, lab.natsURL, lab.natsPrefix = x.HTTPAddr, x.NATSURL, x.NATSPrefix
		lab.apiKey, lab.tls = env.APIKey, env.TLS
	}
	targets := []*bench.Target{hop}
	if slices.Contains(x.Modes, modeDirect) || slices.Contains(x.Modes, modeDirectGet) {
		if lab.direct, err = env.Target(ctx, bench.TargetConfig{NoSync: true, Local: true}); err != nil {
			return nil, err
		}
		targets = append(targets, lab.direct)
	}
	for _, t := range targets {
		if err := t.LoadItems(ctx, env.Progress, x.Records); err != nil {
			return nil, err
		}
	}
	return lab, nil
}

// newFetcher returns mode's fetcher, or "" and a reason to skip the mode.
func (lab *transportsLab) newFetcher(mode string) (fetcher, string, error) {
	switch mode {
	case modeDirect:
		return queryFetcher{query: lab.direct.Server.Query}, "", nil
	case modeDirectGet:
		return getFetcher{get: lab.direct.Server.Get}, "", nil
	case modeGRPC:
		api := lab.hop.API
		return queryFetcher{query: func(ctx context.Context, req *pb.QueryRequest) (*pb.QueryResponse, error) {
			return api.Query(ctx, req)
		}}, "", nil
	case modeGRPCSearch:
		return newSearchFetcher(lab.hop.Client)
	case modeHTTP2:
		if lab.restAddr == "" {
			return nil, "http2 skipped: give the --addr server's REST address with --http-addr", nil
		}
		if err := keyInTheClear(lab.apiKey, lab.tls, lab.restAddr); err != nil {
			return nil, "", err
		}
		return newRESTFetcher(lab.restAddr, lab.apiKey, lab.tls), "", nil
	case modeNATS:
		if lab.natsURL == "" {
			return nil, "nats skipped: give the NATS server of the --addr server with --nats-url", nil
		}
		host := "" // unparsed: taken as remote
		if u, err := url.Parse(lab.natsURL); err == nil {
			host = u.Host
		}
		if err := keyInTheClear(lab.apiKey, lab.tls, host); err != nil {
			return nil, "", err
		}
		f, err := newNATSFetcher(lab.natsURL, lab.natsPrefix, lab.apiKey, lab.tls)
		return f, "", err
	}
	return nil, "", fmt.Errorf("unknown mode %q", mode)
}

// keyInTheClear refuses what the Go client refuses on gRPC: an API key
// sent without TLS to an address that is not loopback.
func keyInTheClear(key string, tlsCfg *tls.Config, addr string) error {
	if key == "" || tlsCfg != nil || auth.IsLoopback(addr) {
		return nil
	}
	return errors.New("refusing to send the API key over a plaintext connection to a non-loopback address; give --tls-ca")
}

// Run implements bench.Experiment.
func (x *Experiment) Run(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	if err := x.defaults(env.Quick); err != nil {
		return nil, err
	}
	if !env.Quick && !env.DurationSet {
		env.Duration = seed002Duration // Env belongs to this run of the experiment
	}
	drive, closeDriver, err := x.driver()
	if err != nil {
		return nil, err
	}
	defer closeDriver()
	lab, err := x.setup(ctx, env)
	if err != nil {
		return nil, err
	}
	res := &bench.Result{Chart: &bench.Chart{
		Title: "One service hop: requests/s through the front, by transport", Kind: bench.Bars,
		XLabel: "mode", YLabel: "requests/s", X: "mode", Unit: "req/s",
	}}
	before, err := lab.lookups(ctx)
	if err != nil {
		return nil, err
	}
	var hopFetches, directFetches uint64
	x.requests = map[string]int64{}
	directRPS := map[string]float64{} // by no-hop mode
	for _, mode := range x.Modes {
		f, skip, err := lab.newFetcher(mode)
		if err != nil {
			return nil, err
		}
		if skip != "" {
			res.Notes = append(res.Notes, skip)
			continue
		}
		fr, err := startFront(f)
		if err != nil {
			return nil, err
		}
		x.runs = x.runs[:0]
		s, err := env.Measure(ctx, mode, func(ctx context.Context, d time.Duration) (bench.Count, error) {
			r, err := drive(ctx, fr.addr(), d)
			if err != nil {
				return bench.Count{}, err
			}
			x.runs = append(x.runs, r)
			return bench.Count{Ops: r.requests, Bytes: r.bytes, Elapsed: r.elapsed}, nil
		})
		if cerr := fr.close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		for _, r := range x.runs {
			x.requests[mode] += r.requests
		}
		if isDirect(mode) {
			directFetches += fr.fetches.Load()
			directRPS[mode] = bench.Summarize(s.Ops).Median
		} else {
			hopFetches += fr.fetches.Load()
		}
		res.Rows = append(res.Rows, x.rows(mode, s, x.runs[len(x.runs)-env.Runs:], directRPS[baseline(mode)])...)
	}
	if err := lab.checkLookups(ctx, before, hopFetches, directFetches); err != nil {
		return nil, err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d records; %s driver, %d connections, %v per run; every mode serves the same JSON per id",
		x.Records, x.Driver, x.Connections, env.Duration))
	res.Notes = append(res.Notes, "direct, grpc and http2 run the same primary-key Query; direct-get and nats (PREFIX.get) the lighter engine.Get; a hop's share is of the no-hop mode making its call")
	res.Notes = append(res.Notes, "MiB/s counts response headers and bodies, as wrk does; the seed's responses were larger (~366 B vs ~250 B)")
	return res, nil
}

// driver returns the load generator --driver names, and what stops it.
func (x *Experiment) driver() (func(ctx context.Context, addr string, d time.Duration) (runStats, error), func(), error) {
	if x.Driver == "wrk" {
		w, err := newWRKDriver(x.Threads, x.Connections, x.Records, 2)
		if err != nil {
			return nil, nil, err
		}
		return w.run, func() { _ = w.close() }, nil
	}
	return func(ctx context.Context, addr string, d time.Duration) (runStats, error) {
		r, err := runLoad(ctx, loadConfig{addr: addr, connections: x.Connections, records: x.Records, seed: 2}, d)
		if err != nil {
			return runStats{}, err
		}
		return runStats{requests: r.requests, bytes: r.bytes, elapsed: r.elapsed, lat: r.latency()}, nil
	}, func() {}, nil
}

// lookups returns the point-lookup counters of the hop server and the
// direct engine (0 without one).
func (lab *transportsLab) lookups(ctx context.Context) ([2]uint64, error) {
	var n [2]uint64
	for i, t := range []*bench.Target{lab.hop, lab.direct} {
		if t == nil {
			continue
		}
		st, err := t.Stats(ctx)
		if err != nil {
			return n, err
		}
		n[i] = st.PointLookups
	}
	return n, nil
}

// checkLookups holds the servers' point-lookup counters against the
// fetches the fronts made: each hop fetch must be one lookup on the lab
// server and each direct one a lookup on the direct engine, or a mode did
// not go where it claims. An --addr server may count other clients' too.
func (lab *transportsLab) checkLookups(ctx context.Context, before [2]uint64, hopFetches, directFetches uint64) error {
	after, err := lab.lookups(ctx)
	if err != nil {
		return err
	}
	hop, direct := after[0]-before[0], after[1]-before[1]
	if hop < hopFetches || (lab.hop.Embedded && hop != hopFetches) {
		return fmt.Errorf("lab server made %d point lookups for %d fetches over hops", hop, hopFetches)
	}
	if direct != directFetches {
		return fmt.Errorf("direct engine made %d point lookups for %d direct fetches", direct, directFetches)
	}
	return nil
}

// rows turns one mode's runs into rows: requests/s (with the seed's),
// latency average, p50, p99 and max (the seed published average and max),
// transfer, and for hops their requests/s as a share of their baseline's
// (baseRPS, 0 when it did not run).
func (x *Experiment) rows(mode string, s bench.Sample, runs []runStats, baseRPS float64) []bench.Row {
	ref := seed002[mode]
	mk := func(metric, unit string, vals []float64, published float64) bench.Row {
		var r *bench.Reference
		if published > 0 {
			r = &bench.Reference{Value: published, Source: seed002Source}
		}
		return bench.NewRow(mode+" "+metric, map[string]any{"mode": mode, "metric": metric}, unit, vals, r)
	}
	lat := func(pick func(latencySummary) time.Duration) []float64 {
		out := make([]float64, len(runs))
		for i, r := range runs {
			out[i] = float64(pick(r.lat)) / float64(time.Millisecond)
		}
		return out
	}
	mib := make([]float64, len(s.Bytes))
	for i, b := range s.Bytes {
		mib[i] = b / (1 << 20)
	}
	rows := []bench.Row{
		mk("requests/s", "req/s", s.Ops, ref.rps),
		mk("latency avg", "ms", lat(func(l latencySummary) time.Duration { return l.avg }), ref.avgMS),
		mk("latency p50", "ms", lat(func(l latencySummary) time.Duration { return l.p50 }), 0),
		mk("latency p99", "ms", lat(func(l latencySummary) time.Duration { return l.p99 }), 0),
		mk("latency max", "ms", lat(func(l latencySummary) time.Duration { return l.max }), ref.maxMS),
		mk("transfer/s", "MiB/s", mib, ref.mibps),
	}
	if !isDirect(mode) && baseRPS > 0 {
		share := make([]float64, len(s.Ops))
		for i, v := range s.Ops {
			share[i] = v / baseRPS
		}
		rows = append(rows, mk("share of "+baseline(mode), "× no hop", share, ref.rps/seed002[modeDirect].rps))
	}
	return rows
}
