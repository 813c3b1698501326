package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/server"
)

// benchOptions are the flags every experiment shares.
type benchOptions struct {
	runs     int
	duration time.Duration
	warmup   time.Duration
	quick    bool
	json     string
	chart    string
	out      string

	// store and etcd* are --store etcd: ingest, batching and concurrency also measure
	// an embedded server on that etcd cluster, beside Pebble.
	store         string
	etcdEndpoints []string
	etcdPrefix    string
}

// etcdExperiments are the experiments that measure the etcd store beside
// Pebble with --store etcd; the others refuse it.
var etcdExperiments = map[string]bool{"ingest": true, "batching": true, "concurrency": true}

// addLabFlags adds the flags every experiment shares to pf.
func addLabFlags(pf *pflag.FlagSet, o *benchOptions) {
	pf.IntVar(&o.runs, "runs", bench.DefaultRuns, fmt.Sprintf("measured runs per configuration (--quick: %d)", bench.QuickRuns))
	pf.DurationVar(&o.duration, "duration", bench.DefaultDuration, fmt.Sprintf("length of one run (--quick: %v)", bench.QuickDuration))
	pf.DurationVar(&o.warmup, "warmup", bench.DefaultWarmup, fmt.Sprintf("unmeasured warm-up before the runs of each configuration (--quick: %v)", bench.QuickWarmup))
	pf.BoolVar(&o.quick, "quick", false, "short runs on small data, every experiment in under a minute in all")
	pf.StringVar(&o.store, "store", "pebble", "pebble, or etcd: ingest, batching and concurrency also measure an embedded server on the etcd cluster of --etcd-endpoints")
	pf.StringSliceVar(&o.etcdEndpoints, "etcd-endpoints", nil, "etcd members' client addresses, HOST:PORT, comma-separated (with --store etcd)")
	pf.StringVar(&o.etcdPrefix, "etcd-prefix", "", "key prefix below which each embedded server gets a fresh store (default \"/protobase-bench/\"; with --store etcd)")
}

// labCommands are a command per experiment and "all".
func (a *app) labCommands(o *benchOptions) []*cobra.Command {
	var cmds []*cobra.Command
	for _, x := range bench.Experiments() {
		cmds = append(cmds, a.benchExperimentCommand(x, o))
	}
	all := &cobra.Command{
		Use:   "all",
		Short: "Run every experiment and write a report",
		Args:  cobra.NoArgs,
		RunE:  exitstatus.RunE(func(cmd *cobra.Command, _ []string) error { return a.benchAll(cmd, *o) }),
	}
	all.Flags().StringVar(&o.out, "out", "", "directory for report.md, report.html, the JSON files and the charts (created if missing; required)")
	return append(cmds, all)
}

func (a *app) benchExperimentCommand(x bench.Experiment, o *benchOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   x.Name(),
		Short: x.Describe(),
		Args:  cobra.NoArgs,
		RunE:  exitstatus.RunE(func(cmd *cobra.Command, _ []string) error { return a.benchOne(cmd, x, *o) }),
	}
	x.Flags(cmd.Flags())
	cmd.Flags().StringVar(&o.json, "json", "", "write the rows as JSON to this file")
	cmd.Flags().StringVar(&o.chart, "chart", "", "draw the rows to this file (.png or .svg)")
	return cmd
}

// options resolves the shared flags: --quick sets the durations and runs
// that were not given explicitly.
func (a *app) benchOptions(cmd *cobra.Command, o benchOptions) (bench.Options, error) {
	opts := bench.Options{Runs: o.runs, Duration: o.duration, Warmup: o.warmup, Quick: o.quick,
		DurationSet: cmd.Flags().Changed("duration")}
	if o.quick {
		q := bench.QuickOptions()
		if !cmd.Flags().Changed("runs") {
			opts.Runs = q.Runs
		}
		if !cmd.Flags().Changed("duration") {
			opts.Duration = q.Duration
		}
		if !cmd.Flags().Changed("warmup") {
			opts.Warmup = q.Warmup
		}
	}
	// Only an explicit --addr targets a running server: the lab's default
	// is its own embedded one.
	if cmd.Flags().Changed("addr") {
		if err := a.benchTarget(&opts); err != nil {
			return opts, err
		}
	} else if cmd.Flags().Changed("api-key") {
		return opts, exitstatus.Usagef("--api-key is for a server given with --addr: the lab's embedded server runs without authentication")
	}
	if err := a.benchStore(cmd, o, &opts); err != nil {
		return opts, err
	}
	if err := opts.Validate(); err != nil {
		return opts, exitstatus.UsageError(fmt.Errorf("--%w", err))
	}
	return opts, nil
}

// benchStore resolves --store and the --etcd flags into opts.Etcd.
func (a *app) benchStore(cmd *cobra.Command, o benchOptions, opts *bench.Options) error {
	switch o.store {
	case "pebble":
		if len(o.etcdEndpoints) > 0 || o.etcdPrefix != "" {
			return exitstatus.Usagef("--etcd-endpoints and --etcd-prefix need --store etcd")
		}
		return nil
	case "etcd":
	default:
		return exitstatus.Usagef("--store %q: want pebble or etcd", o.store)
	}
	if cmd.Flags().Changed("addr") {
		return exitstatus.Usagef("--store etcd is for the lab's embedded servers; with --addr, start the server with serve --store etcd")
	}
	if name := cmd.Name(); name != "all" && !etcdExperiments[name] {
		return exitstatus.Usagef("--store etcd applies to ingest and batching, not to %s", name)
	}
	e := server.EtcdConfig{Prefix: o.etcdPrefix}
	for _, ep := range o.etcdEndpoints {
		if ep = strings.TrimSpace(ep); ep != "" {
			e.Endpoints = append(e.Endpoints, ep)
		}
	}
	if len(e.Endpoints) == 0 {
		return exitstatus.Usagef("--store etcd needs --etcd-endpoints HOST:PORT,...")
	}
	// The server's own check, on the configuration the lab will start.
	if err := (server.Config{DataDir: "-", Store: server.StoreEtcd, Etcd: e}).Validate(); err != nil {
		return exitstatus.UsageError(configError(err))
	}
	opts.Etcd = e
	return nil
}

// benchTarget points opts at the --addr server: over TLS with --tls-ca,
// with the key of --api-key or $PROTOBASE_API_KEY (the lab API needs an
// admin key), on gRPC and on the REST and NATS hops alike.
func (a *app) benchTarget(opts *bench.Options) error {
	opts.Addr = a.conn.Addr
	cfg, err := a.conn.TLSConfig()
	if err != nil {
		return exitstatus.UsageError(err)
	}
	if cfg != nil {
		opts.TLS = cfg
		opts.ClientOptions = append(opts.ClientOptions, client.WithTLS(cfg))
	}
	if key := a.conn.Key(); key != "" {
		opts.APIKey = key
		opts.ClientOptions = append(opts.ClientOptions, client.WithAPIKey(key))
	}
	return nil
}

func (a *app) benchOne(cmd *cobra.Command, x bench.Experiment, o benchOptions) error {
	opts, err := a.benchOptions(cmd, o)
	if err != nil {
		return err
	}
	if o.json != "" {
		if err := bench.CheckWritable(o.json); err != nil {
			return exitstatus.Usagef("--json: %v", err)
		}
	}
	if o.chart != "" {
		if err := bench.CheckChartPath(o.chart); err != nil {
			return exitstatus.Usagef("--chart: %v", err)
		}
		if err := bench.CheckWritable(o.chart); err != nil {
			return exitstatus.Usagef("--chart: %v", err)
		}
	}
	res, err := a.benchRun(cmd.Context(), x, opts)
	if err != nil {
		return err
	}
	if err := bench.WriteTable(a.stdout, res); err != nil {
		return err
	}
	if o.json != "" {
		if err := bench.WriteJSON(o.json, res); err != nil {
			return err
		}
	}
	if o.chart != "" {
		if err := bench.Draw(res, o.chart); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) benchAll(cmd *cobra.Command, o benchOptions) error {
	opts, err := a.benchOptions(cmd, o)
	if err != nil {
		return err
	}
	if o.out == "" {
		return exitstatus.Usagef("--out is required: the directory for report.md")
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return exitstatus.Usagef("--out: %v", err)
	}
	if err := bench.CheckWritable(filepath.Join(o.out, "report.md")); err != nil {
		return exitstatus.Usagef("--out: %v", err)
	}
	var results []*bench.Result
	for _, x := range bench.Experiments() {
		// all takes no experiment's own flags: registering them on a
		// throwaway set gives each experiment the defaults its --help shows.
		x.Flags(pflag.NewFlagSet(x.Name(), pflag.ContinueOnError))
		res, err := a.benchRun(cmd.Context(), x, opts)
		if err != nil {
			return err
		}
		if err := bench.WriteTable(a.stdout, res); err != nil {
			return err
		}
		results = append(results, res)
	}
	path, err := bench.WriteReportDir(o.out, results)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "report: %s\n", path)
	return err
}

// benchRun runs x with progress on stderr: bars on a terminal, lines
// otherwise.
func (a *app) benchRun(ctx context.Context, x bench.Experiment, opts bench.Options) (*bench.Result, error) {
	if a.isTerminal(a.stderr) {
		p := bench.NewBarProgress(a.stderr)
		res, err := bench.Run(ctx, x, opts, p)
		p.Wait()
		return res, err
	}
	// Progress lines are best effort: a closed stderr must not fail a run.
	_, _ = fmt.Fprintf(a.stderr, "%s: %s\n", x.Name(), x.Describe())
	return bench.Run(ctx, x, opts, &bench.LineProgress{W: a.stderr})
}
