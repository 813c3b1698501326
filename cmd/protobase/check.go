package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/server"
)

func (a *app) checkCommand() *cobra.Command {
	var data string
	c := &cobra.Command{
		Use:   "check --data DIR",
		Short: "Verify that a data directory's indexes agree with its records",
		Long: `Check the data directory --data, which no server may be using: every
secondary-index entry must point at a live record that holds the entry's
value, every record must have the entries of every READY index (an index
still building may lack some), and a unique index must hold one record per
value. Entries of unknown indexes and records of unknown types are reported
too.

The directory is opened read-only: a log left by a crashed server is
replayed in memory, nothing is written. Check prints one line per problem
and a summary. Exit status: 0 consistent, 1 inconsistent or unreadable
(for example locked by a running server), 2 a wrong command line.`,
		Example: `  protobase check --data ./protobase-data`,
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if data == "" {
				return usagef("--data must not be empty")
			}
			report, err := server.Check(cmd.Context(), data)
			if err != nil {
				return fmt.Errorf("%w\n(is a server using the data directory %s?)", err, data)
			}
			if _, err := report.WriteTo(a.stdout); err != nil {
				return err
			}
			if !report.OK() {
				return &exitError{code: exitFailed, err: errors.New("the data directory is inconsistent")}
			}
			return nil
		}),
	}
	c.Flags().StringVar(&data, "data", "./protobase-data", "data directory")
	return c
}
