// Command protobase is the command line of Protobase: it runs the server
// (serve), talks to one (schema, insert, update, upsert, remove, patch,
// write, search, scan, query, get, watch), manages its API keys (keys), checks a data directory
// (check) and probes a server's health (health). The benchmark lab is a command of its own, protobase-bench.
//
// main only wires the process to run, which builds the command tree and maps
// its outcome to an exit code: 0 success, 1 the operation failed, 2 the
// command line was wrong.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/protobase/protobase/internal/clientflags"
	"github.com/protobase/protobase/internal/exitstatus"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// app holds what every command shares: the process's streams and the global
// flags. Tests build one through run.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	// conn holds --addr, --api-key and the --tls-* flags: the server the
	// client commands talk to and how they reach it.
	conn clientflags.Flags

	// isTerminal reports whether w is an interactive terminal (progress bars
	// are drawn only then).
	isTerminal func(w io.Writer) bool
}

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, isTerminal: isTerminal}
	return a.run(ctx, args)
}

func (a *app) run(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	return exitstatus.Execute(ctx, root, a.stderr)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "protobase",
		Short: "Protobase, a gRPC-native database",
		Long: `Protobase stores protobuf messages as records. Record types are declared in
.proto files applied to the server; records are written and read over gRPC (and REST/JSON or NATS: serve --help).

This command runs a server (serve), talks to one (schema, insert, update,
upsert, remove, patch, write, search, scan, query, get, watch, and
interactively: shell), manages its API keys (keys), checks a data
directory's indexes against its records (check) and asks whether a server
is serving (health, for probes); the benchmark lab is a command of its
own, protobase-bench. The client
commands reach the server at --addr, which defaults to $PROTOBASE_ADDR or
else ` + clientflags.DefaultAddr + `; a server that requires API keys (docs/security.md)
takes one from --api-key or $PROTOBASE_API_KEY.`,
		Example: `  protobase serve --data ./protobase-data
  protobase schema apply shop.proto
  protobase insert --type shop.User users.jsonl
  protobase search --type shop.User --where 'name prefix "An"'`,
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	// Flag errors are usage errors (exit 2).
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitstatus.UsageError(err) })
	root.CompletionOptions.HiddenDefaultCmd = true

	a.conn.Register(root.PersistentFlags())

	root.AddCommand(
		a.serveCommand(),
		a.schemaCommand(),
		a.insertCommand(),
		a.updateCommand(),
		a.upsertCommand(),
		a.removeCommand(),
		a.patchCommand(),
		a.writeBatchCommand(),
		a.searchCommand(),
		a.scanCommand(),
		a.queryCommand(),
		a.getCommand(),
		a.keysCommand(),
		a.versionCommand(),
		a.healthCommand(),
		a.benchCommand(),
		a.checkCommand(),
		a.backupCommand(),
		a.restoreCommand(),
		a.exportCommand(),
		a.importCommand(),
		a.watchCommand(),
		a.shellCommand(),
	)
	return root
}

// groupCommand makes a command that only holds subcommands: without
// arguments it prints its help; with one it is a usage error.
func groupCommand(c *cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return exitstatus.UsageError(fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()))
		}
		return cmd.Help()
	}
	return c
}

// isTerminalReader reports whether r is an interactive terminal (records
// typed on it are sent as they come).
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
