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
	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/internal/export"
)

func (a *app) exportCommand() *cobra.Command {
	var types []string
	var to, format string
	var versions bool
	c := &cobra.Command{
		Use:   "export [--type T]... --to FILE [--format binary|json] [--versions]",
		Short: "Write the schema and every record to a portable file",
		Long: `Ask the server at --addr for its schema and every record of the types
named by --type (repeatable; none: every type the key may read), all read
at one snapshot, and write them to FILE (created or replaced; removed
again when the export fails).

The default binary format keeps each record's stored bytes (length-
delimited protobuf messages behind a short header); --format json writes
JSON lines, a schema line first and then {"type": ..., "record": ...} per
record. --versions also writes each record's version, as read at the
export's snapshot (JSON: a "version" member of each record's line, a string
as protobuf JSON writes 64-bit integers). Load a file with 'protobase
import FILE', which writes its records anew: they get new versions, and
the versions in the file are not used. A scoped key exports only types in
its scope. See docs/operations.md.`,
		Example: `  protobase export --to shop.pbexport
  protobase export --type shop.User --to users.jsonl --format json
  protobase export --type shop.User --to users.jsonl --format json --versions`,
		Args: cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return exitstatus.Usagef("--to must name the export file")
			}
			f, err := export.ParseFormat(format)
			if err != nil {
				return exitstatus.UsageError(err)
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
			exp := c.Export
			if versions {
				exp = c.ExportVersioned
			}
			n, err := exp(cmd.Context(), types, out, f)
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
	c.Flags().BoolVar(&versions, "versions", false, "also write each record's version")
	return c
}

type importOptions struct {
	batch       int
	progress    string
	applySchema bool
	keepSchema  bool
}

func (a *app) importCommand() *cobra.Command {
	var o importOptions
	c := &cobra.Command{
		Use:   "import FILE [--batch N] [--progress PATH] [--apply-schema | --keep-schema]",
		Short: "Load an export file through the normal write path",
		Long: `Check the schema held in FILE against the server's, then upsert its
records in batches of --batch records. Either format is read; the file is
checked as it is read, and an error names the byte offset or line.

The import goes ahead when the server's schema is the file's, or when the
server has no schema at all (it then takes the file's). A file whose
schema differs is refused before any record is sent, with the plan of
what applying it would add, change or drop: --apply-schema applies the
file's schema anyway (dropping a type with records is still refused), and
--keep-schema leaves the server's schema as it is and writes the records
under it (a record it does not accept, such as one that breaks its unique
index, stops the import).

The count of records acknowledged durable is kept in FILE.import-progress
(or --progress); a rerun after an interruption skips them, and since
records are upserted, a repeat never duplicates one. An import that fails
part way leaves the batches acknowledged before the failure applied, says
how many records they hold, and keeps the progress file for the rerun.
The progress file is removed when the import completes.
See docs/operations.md, "Export and import".`,
		Example: `  protobase import shop.pbexport
  protobase import --apply-schema shop.pbexport
  protobase --addr etcd-backed:7070 import shop.pbexport --batch 5000`,
		Args: cobra.ExactArgs(1),
		RunE: exitstatus.RunE(func(cmd *cobra.Command, args []string) error { return a.importFile(cmd, args[0], o) }),
	}
	c.Flags().IntVar(&o.batch, "batch", 1000, "records per write batch")
	c.Flags().StringVar(&o.progress, "progress", "", "progress file (default FILE.import-progress)")
	c.Flags().BoolVar(&o.applySchema, "apply-schema", false, "apply the file's schema when it differs from the server's")
	c.Flags().BoolVar(&o.keepSchema, "keep-schema", false, "keep the server's schema and import the records under it")
	return c
}

func (a *app) importFile(cmd *cobra.Command, file string, o importOptions) error {
	if o.batch <= 0 {
		return exitstatus.Usagef("--batch must be positive")
	}
	mode := client.ImportSchemaMatch
	switch {
	case o.applySchema && o.keepSchema:
		return exitstatus.Usagef("--apply-schema and --keep-schema exclude each other")
	case o.applySchema:
		mode = client.ImportSchemaApply
	case o.keepSchema:
		mode = client.ImportSchemaKeep
	}
	progress := o.progress
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
	durable := skip
	res, err := c.Import(cmd.Context(), in, client.ImportOptions{Batch: o.batch, Skip: skip, Schema: mode,
		Progress: func(n uint64) error { durable = n; return writeProgress(progress, n) }})
	var mismatch *client.SchemaMismatchError
	switch {
	case errors.As(err, &mismatch):
		var b strings.Builder
		fmt.Fprintf(&b, "the schema in %s differs from the server's; nothing was imported.\napplying it would change:\n", file)
		writePlan(&b, mismatch.Plan, true)
		b.WriteString("rerun with --apply-schema to apply the file's schema, or with --keep-schema to import the records under the server's schema")
		return errors.New(b.String())
	case err != nil:
		return importFailure(err, res, skip, durable, progress)
	}
	if err := os.Remove(progress); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if res.Schema.GetApplied() {
		writePlan(a.stdout, res.Schema.GetPlan(), false)
		fmt.Fprintf(a.stdout, "applied the file's schema, schema version %d\n", res.Schema.GetVersion())
	}
	_, err = fmt.Fprintf(a.stdout, "imported %d records from %s (%d skipped as already imported)\n", res.Written, file, skip)
	return err
}

// importFailure says what a failed import leaves on the server: the
// schema it applied, and the records of the batches made durable before
// the failure, which the progress file counts for the rerun.
func importFailure(err error, res *client.ImportResult, skip, durable uint64, progress string) error {
	var b strings.Builder
	b.WriteString(err.Error())
	if res != nil && res.Schema.GetApplied() {
		fmt.Fprintf(&b, "\nthe file's schema was applied (schema version %d) and stays", res.Schema.GetVersion())
	}
	if durable == skip {
		fmt.Fprintf(&b, "\nthis run made no record durable")
		if skip > 0 {
			fmt.Fprintf(&b, "; %d records of earlier runs are, and %s counts them", skip, progress)
		}
		return errors.New(b.String())
	}
	fmt.Fprintf(&b, "\n%d of the file's records are durable on the server (%d by this run): the batches acknowledged "+
		"before the failure stay applied, and %s counts them.\n"+
		"Rerun the same command to resume after them once the cause is fixed (records are upserted, so none is doubled); "+
		"to undo the import instead, remove those records (see docs/operations.md, \"Export and import\")",
		durable, durable-skip, progress)
	return errors.New(b.String())
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
