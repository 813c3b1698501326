// Command protobase-bench is the benchmark lab's command line: it runs the
// experiments of bench/ against an embedded server, or against a running
// one started with 'protobase serve --lab', and prints, saves and charts
// what they measured. bench/ is the library; this command only parses
// flags.
//
// It is a command of its own, not a subcommand of protobase, so that the
// server's binary links neither the experiments nor the plotting library
// that draws their charts (gonum.org/v1/plot, with its fonts and its PDF,
// SVG and LaTeX back ends): a production server carries only what it runs.
// The flags that reach a server (--addr, --api-key, --tls-*) are protobase's
// own (internal/clientflags), and so are the exit codes: 0 success, 1 the
// operation failed, 2 the command line was wrong.
package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	// Every experiment registers itself with bench when imported.
	_ "github.com/protobase/protobase/bench/experiments"
	"github.com/protobase/protobase/internal/clientflags"
	"github.com/protobase/protobase/internal/exitstatus"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// app holds what every command shares: the process's streams and the global
// flags. Tests build one through run.
type app struct {
	stdout, stderr io.Writer

	// conn holds --addr, --api-key and the --tls-* flags: the running
	// server an explicit --addr points the lab at.
	conn clientflags.Flags

	// isTerminal reports whether w is an interactive terminal (progress bars
	// are drawn only then).
	isTerminal func(w io.Writer) bool
}

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, isTerminal: isTerminal}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return exitstatus.Execute(ctx, root, stderr)
}

func (a *app) rootCommand() *cobra.Command {
	var o benchOptions
	root := &cobra.Command{
		Use:   "protobase-bench",
		Short: "Run the benchmark lab's experiments",
		Long: `Run the lab's experiments: each starts an embedded server on a loopback
port in a fresh temporary directory (or, with --addr, uses a running server
started with 'protobase serve --lab'; a secured one takes --tls-ca and an
admin key in --api-key, which the transports experiment's REST and NATS hops
send too), loads its data, warms up, runs each configuration --runs times for
--duration, and prints the median with min and max beside the published
figure and the ratio measured/published.

--json FILE writes the rows as JSON, --chart FILE.png|FILE.svg draws them.
'all --out DIR' runs every experiment and writes DIR/report.md with every
table and chart, DIR/report.html (the same report as one self-contained
page to share), plus one JSON file per experiment. --quick makes every
experiment short and small (all of them in under a minute): for smoke checks,
not for comparison.

--store etcd --etcd-endpoints HOST:PORT,... makes ingest and batching also
run their embedded servers on that etcd cluster (each under a fresh prefix
below --etcd-prefix, dropped afterwards), beside Pebble in the same run, as
rows marked store=etcd and "lookup etcd", each followed by rows of a bare
etcd client doing the same on the same cluster, and of two servers and two
bare clients at once (make cluster starts a local cluster). See
docs/benchmarks.md and docs/scaling.md.`,
		Example: `  protobase-bench batching
  protobase-bench batching --transport-only --chart batching.svg
  protobase-bench patterns --runs 3 --duration 5s --json patterns.json
  protobase-bench all --quick --out lab-report
  protobase serve --lab & protobase-bench ingest --addr 127.0.0.1:7070
  protobase-bench batching --addr db.example:7070 --tls-ca ca.pem --api-key "$(cat admin.key)"
  protobase-bench ingest --batches 1000 --store etcd --etcd-endpoints 127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379`,
		Version: versionString(),
		// Without arguments the command prints its help; an argument that
		// names no experiment is a usage error.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return exitstatus.Usagef("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	// Flag errors are usage errors (exit 2).
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitstatus.UsageError(err) })
	root.CompletionOptions.HiddenDefaultCmd = true
	a.conn.Register(root.PersistentFlags())
	addLabFlags(root.PersistentFlags(), &o)
	root.AddCommand(a.labCommands(&o)...)
	return root
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
