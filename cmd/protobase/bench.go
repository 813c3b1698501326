package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/internal/exitstatus"
)

// benchCommand answers the lab's old place in this command with its new
// one. The lab is protobase-bench, a command of its own, so that the
// server's binary links neither its experiments nor the plotting library
// that draws their charts.
func (a *app) benchCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "bench",
		Short:              "The benchmark lab is the protobase-bench command",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return exitstatus.Usagef("the benchmark lab is a command of its own: run protobase-bench %s"+
				" (built by make build-bench, or go run ./cmd/protobase-bench; see docs/benchmarks.md)",
				strings.Join(args, " "))
		},
	}
}
