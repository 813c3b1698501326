package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/server"
)

func (a *app) checkCommand() *cobra.Command {
	var data string
	var storage storeOptions
	c := &cobra.Command{
		Use:   "check --data DIR | --store etcd --etcd-endpoints HOST:PORT,...",
		Short: "Verify that a data directory's indexes agree with its records",
		Long: `Check the data directory --data, which no server may be using: every
secondary-index entry must point at a live record that holds the entry's
value, every record must have the entries of every READY index (an index
still building may lack some), and a unique index must hold one record per
value. Each READY aggregate index is recomputed from the records: a group
whose count or sums differ, a group without its entry and an entry of a
group without records are reported. Entries of unknown indexes and records
of unknown types are reported
too, and so is a record whose version is malformed, 0, or (on Pebble)
above the last commit. The change log (Watch's history) is read whole: every entry must read
to its last change, and its commits must follow one another.

The directory is opened read-only: a log left by a crashed server is
replayed in memory, nothing is written. With --store etcd (and the same
etcd flags as serve) check reads the store under --etcd-prefix at one
revision; servers may keep running, though writes after that revision are
not seen. Check prints one line per problem and a summary. Exit status: 0 consistent, 1 inconsistent or unreadable
(for example locked by a running server, or a damaged table), 2 a wrong
command line.`,
		Example: `  protobase check --data ./protobase-data
  protobase check --store etcd --etcd-endpoints 127.0.0.1:2379`,
		Args: cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			report, err := a.check(cmd, data, storage)
			if err != nil {
				return err
			}
			if _, err := report.WriteTo(a.stdout); err != nil {
				return err
			}
			if !report.OK() {
				return &exitstatus.Error{Code: exitstatus.Failed, Err: errors.New("the data directory is inconsistent")}
			}
			return nil
		}),
	}
	c.Flags().StringVar(&data, "data", "./protobase-data", "data directory")
	storage.addFlags(c.Flags())
	return c
}

// check runs the checker on the store the flags name. The flags' rules
// are the server's (server.Config.Validate), worded in check's flags.
func (a *app) check(cmd *cobra.Command, data string, storage storeOptions) (*server.CheckReport, error) {
	cfg := server.Config{DataDir: data}
	storage.apply(&cfg)
	if err := cfg.Validate(); err != nil {
		return nil, exitstatus.UsageError(configError(err))
	}
	if cfg.Store == server.StoreEtcd {
		if cmd.Flags().Changed("data") {
			return nil, exitstatus.Usagef("--data applies to --store pebble; with --store etcd the store is the cluster's")
		}
		return server.CheckEtcd(cmd.Context(), cfg.Etcd)
	}
	report, err := server.Check(cmd.Context(), data)
	if errors.Is(err, server.ErrLocked) {
		return nil, fmt.Errorf("%w\n(is a server using the data directory %s?)", err, data)
	}
	if err != nil {
		return nil, err
	}
	return report, nil
}
