package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
)

type schemaApplyOptions struct {
	dryRun    bool
	allowDrop []string
	root      string
}

func (a *app) schemaApplyCommand() *cobra.Command {
	var o schemaApplyOptions
	cmd := &cobra.Command{
		Use:   "apply FILE|DIR...",
		Short: "Make the given .proto files the whole schema",
		Long: `Send .proto files to the server, which compiles them, plans the change
from the current schema and applies it. The files given are the whole
schema: a file applied before and not given now is removed, and with it its
record types, which the server refuses unless each is named with
--allow-drop (dropping a type deletes its records).

Each file is sent under its import path, the name other files import it
by. The import path is the file's path relative to --root; without --root
it is the file's base name, or, for a file found in a DIR argument (every
*.proto file below DIR), its path relative to DIR. So with --root, "import"
statements may name files in subdirectories:

  protobase schema apply --root schema schema/shop/user.proto schema/shop/order.proto

sends "shop/user.proto" and "shop/order.proto". Files may import
"protobase/v1/options.proto" and the google/protobuf and google/api files
without sending them.

The plan lists the record types added, changed and dropped, the indexes
added (an index on a type that already has records is built in the
background, and serves reads once built) and dropped, and the files. With
--dry-run the server only plans. A schema that does not compile is refused
with every problem as file:line:col: message.`,
		Example: `  protobase schema apply shop.proto
  protobase schema apply --dry-run ./schema
  protobase schema apply --allow-drop shop.LegacyOrder shop.proto`,
		Args: cobra.MinimumNArgs(1),
		RunE: exitstatus.RunE(func(cmd *cobra.Command, args []string) error { return a.schemaApply(cmd, args, o) }),
	}
	f := cmd.Flags()
	f.BoolVar(&o.dryRun, "dry-run", false, "plan only, change nothing")
	f.StringArrayVar(&o.allowDrop, "allow-drop", nil, "full name of a record type that may be dropped with its records (repeatable)")
	f.StringVar(&o.root, "root", "", "directory the import paths are relative to (default: each file's own directory)")
	return cmd
}

func (a *app) schemaApply(cmd *cobra.Command, args []string, o schemaApplyOptions) error {
	files, err := readProtoFiles(args, o.root)
	if err != nil {
		return err
	}
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.ApplySchema(cmd.Context(), files, client.SchemaOptions{DryRun: o.dryRun, AllowDrop: o.allowDrop})
	if err != nil {
		return callError("schema apply", a.conn.Addr, err)
	}
	writePlan(a.stdout, resp.GetPlan(), o.dryRun)
	switch {
	case o.dryRun:
		fmt.Fprintln(a.stdout, "dry run, nothing changed")
	case resp.GetApplied():
		fmt.Fprintf(a.stdout, "applied, schema version %d\n", resp.GetVersion())
	default:
		fmt.Fprintf(a.stdout, "no change, schema version %d\n", resp.GetVersion())
	}
	return nil
}

// readProtoFiles reads the .proto files named by args (files, or
// directories searched for *.proto) and keys each by its import path: its
// path relative to root, or, without root, to its directory argument or its
// own directory.
func readProtoFiles(args []string, root string) (map[string]string, error) {
	var absRoot string
	if root != "" {
		var err error
		if absRoot, err = filepath.Abs(root); err != nil {
			return nil, fmt.Errorf("--root: %w", err)
		}
	}
	files := make(map[string]string)
	from := make(map[string]string) // import path -> file it was read from
	add := func(path, base string) error {
		if absRoot != "" {
			base = absRoot
		}
		key, err := importPath(path, base)
		if err != nil {
			return err
		}
		if prev, ok := from[key]; ok {
			return exitstatus.Usagef("%s and %s both have the import path %q; use --root to tell them apart", prev, path, key)
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[key] = string(src)
		from[key] = path
		return nil
	}
	for _, arg := range args {
		fi, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			if err := add(arg, filepath.Dir(arg)); err != nil {
				return nil, err
			}
			continue
		}
		var found []string
		err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".proto") {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no .proto files", arg)
		}
		for _, p := range found {
			if err := add(p, arg); err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

// importPath is path relative to base, with forward slashes.
func importPath(path, base string) (string, error) {
	absPath, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	absBase, err := filepath.Abs(base)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absBase, absPath)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", exitstatus.Usagef("%s is not under --root %s", path, base)
	}
	return filepath.ToSlash(rel), nil
}

// writePlan prints the sections of plan that are not empty, or "no change".
func writePlan(w io.Writer, plan *pb.SchemaPlan, dryRun bool) {
	if isEmptyPlan(plan) {
		fmt.Fprintln(w, "no change")
		return
	}
	section := func(title string, n int) bool {
		if n == 0 {
			return false
		}
		fmt.Fprintf(w, "%s (%d):\n", title, n)
		return true
	}
	if section("types added", len(plan.GetTypesAdded())) {
		for _, t := range plan.GetTypesAdded() {
			fmt.Fprintf(w, "  + %s\n", t)
		}
	}
	if section("types changed", len(plan.GetTypesChanged())) {
		for _, t := range plan.GetTypesChanged() {
			fmt.Fprintf(w, "  ~ %s\n", t.GetType())
			for _, c := range t.GetChanges() {
				fmt.Fprintf(w, "      %s\n", c)
			}
		}
	}
	if section("types dropped", len(plan.GetTypesDropped())) {
		deleted := "deleted"
		if dryRun {
			deleted = "to delete"
		}
		for _, t := range plan.GetTypesDropped() {
			fmt.Fprintf(w, "  - %s (%d %s %s)\n", t.GetType(), t.GetRecords(), plural(t.GetRecords(), "record", "records"), deleted)
		}
	}
	if section("indexes added", len(plan.GetIndexesAdded())) {
		for _, ix := range plan.GetIndexesAdded() {
			fmt.Fprintf(w, "  + %s\n", describeIndex(ix, dryRun))
		}
	}
	if section("indexes dropped", len(plan.GetIndexesDropped())) {
		for _, ix := range plan.GetIndexesDropped() {
			fmt.Fprintf(w, "  - %s\n", describeIndex(ix, false))
		}
	}
	var files []string
	for _, f := range plan.GetFilesAdded() {
		files = append(files, "  + "+f)
	}
	for _, f := range plan.GetFilesChanged() {
		files = append(files, "  ~ "+f)
	}
	for _, f := range plan.GetFilesRemoved() {
		files = append(files, "  - "+f)
	}
	if section("files", len(files)) {
		sort.SliceStable(files, func(i, j int) bool { return files[i][4:] < files[j][4:] })
		for _, f := range files {
			fmt.Fprintln(w, f)
		}
	}
}

// describeIndex is "shop.User index email_unique (email) unique".
func describeIndex(ix *pb.IndexChange, dryRun bool) string {
	s := fmt.Sprintf("%s index %s (%s)", ix.GetType(), ix.GetIndex(), strings.Join(ix.GetFields(), ", "))
	if ix.GetUnique() {
		s += " unique"
	}
	if ix.GetBuildRequired() {
		if dryRun {
			s += " (would be built in background)"
		} else {
			s += " (building in background)"
		}
	}
	return s
}

func isEmptyPlan(p *pb.SchemaPlan) bool {
	return len(p.GetTypesAdded())+len(p.GetTypesChanged())+len(p.GetTypesDropped())+
		len(p.GetIndexesAdded())+len(p.GetIndexesDropped())+
		len(p.GetFilesAdded())+len(p.GetFilesChanged())+len(p.GetFilesRemoved()) == 0
}

func plural[N int | uint64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
