package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/internal/backup"
	"github.com/protobase/protobase/internal/exitstatus"
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
	var from, data string
	c := &cobra.Command{
		Use:   "restore --from DIR --data NEWDIR",
		Short: "Restore a backup into a new data directory",
		Long: `Check every file of the backup in --from against its manifest (size and
SHA-256) and, only if all check out, copy them into the data directory
--data (created if missing; it must be empty). Then run
'protobase serve --data NEWDIR'. Nothing is written when a file is
damaged or missing.`,
		Example: `  protobase restore --from /backups/protobase-2026-11-24 --data ./restored`,
		Args:    cobra.NoArgs,
		RunE: exitstatus.RunE(func(_ *cobra.Command, _ []string) error {
			if from == "" || data == "" {
				return exitstatus.Usagef("--from and --data are both required")
			}
			m, err := backup.Restore(from, data)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "restored position %d (schema version %d) into %s\n",
				m.GetPosition(), m.GetSchemaVersion(), data)
			return err
		}),
	}
	c.Flags().StringVar(&from, "from", "", "backup directory")
	c.Flags().StringVar(&data, "data", "", "new data directory (created; must be empty)")
	return c
}
