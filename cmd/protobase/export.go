package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/export"
)

func (a *app) exportCommand() *cobra.Command {
	var types []string
	var to, format string
	c := &cobra.Command{
		Use:   "export [--type T]... --to FILE [--format binary|json]",
		Short: "Write the schema and every record to a portable file",
		Long: `Ask the server at --addr for its schema and every record of the types
named by --type (repeatable; none: every type the key may read), all read
at one snapshot, and write them to FILE (created or replaced; removed
again when the export fails).

The default binary format keeps each record's stored bytes (length-
delimited protobuf messages behind a short header); --format json writes
JSON lines, a schema line first and then {"type": ..., "record": ...} per
record. Load a file with 'protobase import FILE'. A scoped key exports only
types in its scope. See docs/operations.md.`,
		Example: `  protobase export --to shop.pbexport
  protobase export --type shop.User --to users.jsonl --format json`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usagef("--to must name the export file")
			}
			f, err := export.ParseFormat(format)
			if err != nil {
				return usageError(err)
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			out, err := os.Create(to)
			if err != nil {
				return err
			}
			n, err := c.Export(cmd.Context(), types, out, f)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				// An import would refuse the partial file (it has no end);
				// removing it leaves nothing that looks like an export.
				_ = os.Remove(to)
				return fmt.Errorf("export to %s (removed): %w", to, err)
			}
			_, err = fmt.Fprintf(a.stdout, "exported %d records to %s (%s)\n", n, to, f)
			return err
		}),
	}
	c.Flags().StringArrayVar(&types, "type", nil, "record type to export (repeatable; default: every type)")
	c.Flags().StringVar(&to, "to", "", "file to write")
	c.Flags().StringVar(&format, "format", "binary", "file format: binary or json")
	return c
}

func (a *app) importCommand() *cobra.Command {
	var batch int
	var progress string
	c := &cobra.Command{
		Use:   "import FILE [--batch N] [--progress PATH]",
		Short: "Load an export file through the normal write path",
		Long: `Apply the schema held in FILE (a server with the same schema is left
unchanged) and upsert its records in batches of --batch records. Either
format is read; the file is checked as it is read, and an error names the
byte offset or line.

The count of records acknowledged durable is kept in FILE.import-progress
(or --progress); a rerun after an interruption skips them, and since
records are upserted, a repeat never duplicates one. The progress file is
removed when the import completes.`,
		Example: `  protobase import shop.pbexport
  protobase --addr etcd-backed:7070 import shop.pbexport --batch 5000`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if batch <= 0 {
				return usagef("--batch must be positive")
			}
			file := args[0]
			if progress == "" {
				progress = file + ".import-progress"
			}
			skip, err := readProgress(progress)
			if err != nil {
				return err
			}
			in, err := os.Open(file)
			if err != nil {
				return err
			}
			defer in.Close()
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.Import(cmd.Context(), in, client.ImportOptions{Batch: batch, Skip: skip,
				Progress: func(n uint64) error { return writeProgress(progress, n) }})
			if err != nil {
				return err
			}
			if err := os.Remove(progress); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "imported %d records from %s (%d skipped as already imported)\n", res.Written, file, skip)
			return err
		}),
	}
	c.Flags().IntVar(&batch, "batch", 1000, "records per write batch")
	c.Flags().StringVar(&progress, "progress", "", "progress file (default FILE.import-progress)")
	return c
}

// readProgress reads the durable count an earlier import left; 0 when
// there is none.
func readProgress(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("progress file %s: not a record count: %w", path, err)
	}
	return n, nil
}

// writeProgress replaces the progress file atomically (write, fsync,
// rename), so an interruption leaves the old count or the new one.
func writeProgress(path string, n uint64) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(strconv.FormatUint(n, 10) + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
