package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/internal/backup"
	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/server"
)

func (a *app) backupCommand() *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:   "backup --to DIR",
		Short: "Copy a running server's store into a backup directory",
		Long: `Ask the server at --addr for a consistent copy of its store, taken at one
commit position while writes go on, and write it into --to (created if
missing; it must be empty). Every file is checked against the manifest the
server sends last, and DIR/manifest.json (format version, position,
schema version, every file's size and SHA-256) is written only then.
With auth on, the key must be an admin key without a scope.

Restore with 'protobase restore --from DIR --data NEWDIR'; check a backup
with 'protobase backup verify DIR'. See docs/operations.md.`,
		Example: `  protobase backup --to /backups/protobase-2026-11-24
  protobase backup verify /backups/protobase-2026-11-24
  protobase restore --from /backups/protobase-2026-11-24 --data ./restored`,
		Args: cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return exitstatus.Usagef("--to must name the backup directory")
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			m, err := c.Backup(cmd.Context(), to)
			if err != nil {
				return err
			}
			var size uint64
			for _, f := range m.GetFiles() {
				size += f.GetSize()
			}
			_, err = fmt.Fprintf(a.stdout, "backup of position %d (schema version %d): %d files, %d bytes in %s\n",
				m.GetPosition(), m.GetSchemaVersion(), len(m.GetFiles()), size, to)
			return err
		}),
	}
	c.Flags().StringVar(&to, "to", "", "backup directory (created; must be empty)")
	c.AddCommand(&cobra.Command{
		Use:   "verify DIR",
		Short: "Check every file of a backup against its manifest",
		Long: `Read DIR/manifest.json and check every file it lists (size and SHA-256),
and that DIR holds no other file. Exit status 0 when the backup is whole,
1 when a file is missing, damaged or extra.`,
		Example: `  protobase backup verify /backups/protobase-2026-11-24`,
		Args:    cobra.ExactArgs(1),
		RunE: exitstatus.RunE(func(_ *cobra.Command, args []string) error {
			m, err := backup.Verify(args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "backup of position %d (schema version %d): %d files verified\n",
				m.GetPosition(), m.GetSchemaVersion(), len(m.GetFiles()))
			return err
		}),
	})
	return c
}

func (a *app) restoreCommand() *cobra.Command {
	var from, data, logFrom, toTime string
	var toPosition uint64
	c := &cobra.Command{
		Use:   "restore --from DIR --data NEWDIR [--log-from LATER (--to-time T | --to-position P)]",
		Short: "Restore a backup into a new data directory, optionally to a point in time",
		Long: `Check every file of the backup in --from against its manifest (size and
SHA-256) and, only if all check out, copy them into the data directory
--data (created if missing; it must be empty). Then run
'protobase serve --data NEWDIR'. Nothing is written when a file is
damaged or missing.

With --log-from LATER, a later backup of the same server, the restore then
replays LATER's change log (Watch's history, which every backup holds)
from the position of --from on, through the write path, up to the commit
time --to-time (RFC 3339, inclusive) or the position --to-position
(inclusive): a mistake such as a wrong bulk update is undone by restoring
to the moment before it. The log must still hold every commit after the
base's position (--watch-retention and --watch-retention-bytes trim it),
and the schema must not have changed between the two backups; otherwise
the restore is refused, naming positions and times, before --data is
written. See "Point-in-time restore" in docs/operations.md.`,
		Example: `  protobase restore --from /backups/protobase-2026-11-24 --data ./restored
  protobase restore --from /backups/base --log-from /backups/later \
    --to-position 41230 --data ./restored`,
		Args: cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			if from == "" || data == "" {
				return exitstatus.Usagef("--from and --data are both required")
			}
			if logFrom == "" {
				if toTime != "" || toPosition != 0 {
					return exitstatus.Usagef("--to-time and --to-position need --log-from")
				}
				m, err := backup.Restore(from, data)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "restored position %d (schema version %d) into %s\n",
					m.GetPosition(), m.GetSchemaVersion(), data)
				return err
			}
			p, err := pointInTime(from, logFrom, data, toTime, toPosition)
			if err != nil {
				return err
			}
			return a.restoreToPoint(cmd, p)
		}),
	}
	c.Flags().StringVar(&from, "from", "", "backup directory")
	c.Flags().StringVar(&data, "data", "", "new data directory (created; must be empty)")
	c.Flags().StringVar(&logFrom, "log-from", "", "a later backup whose change log is replayed after --from")
	c.Flags().StringVar(&toTime, "to-time", "", "with --log-from: replay the commits up to this time (RFC 3339, inclusive)")
	c.Flags().Uint64Var(&toPosition, "to-position", 0, "with --log-from: replay the commits up to this position (inclusive)")
	return c
}

// pointInTime reads restore's point-in-time flags.
func pointInTime(from, logFrom, data, toTime string, toPosition uint64) (server.PointInTime, error) {
	p := server.PointInTime{Base: from, Later: logFrom, DataDir: data, ToPosition: toPosition}
	if (toTime == "") == (toPosition == 0) {
		return p, exitstatus.Usagef("--log-from needs one of --to-time and --to-position")
	}
	if toTime != "" {
		t, err := time.Parse(time.RFC3339Nano, toTime)
		if err != nil {
			return p, exitstatus.Usagef("--to-time %q is not an RFC 3339 time (2026-11-24T10:15:30Z)", toTime)
		}
		p.ToTime = t
	}
	return p, nil
}

func (a *app) restoreToPoint(cmd *cobra.Command, p server.PointInTime) error {
	r, err := server.RestoreToPoint(cmd.Context(), p)
	if err != nil {
		return err
	}
	at := "no commit replayed"
	if !r.At.IsZero() {
		at = "committed " + r.At.Format(time.RFC3339Nano)
	}
	_, err = fmt.Fprintf(a.stdout, "restored position %d (schema version %d) into %s: base position %d and %d commits (%d changes) replayed; the last %s\n",
		r.Position, r.Base.GetSchemaVersion(), p.DataDir, r.Base.GetPosition(), r.Entries, r.Changes, at)
	return err
}
