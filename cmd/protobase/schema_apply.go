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
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
)

type schemaApplyOptions struct {
	dryRun    bool
	allowDrop []string
	root      string
	add       bool
	remove    []string
}

func (a *app) schemaApplyCommand() *cobra.Command {
	var o schemaApplyOptions
	cmd := &cobra.Command{
		Use:   "apply FILE|DIR...",
		Short: "Make the given .proto files the whole schema, or add them to it",
		Long: `Send .proto files to the server, which compiles them, plans the change
from the current schema and applies it. The files given are the whole
schema: a file applied before and not given now is removed.

With --add the files given are added to the schema instead: each is added,
or replaces the file of the same import path, and every other file the
server holds is kept. --remove FILE (with --add) removes a file by its
import path; with --remove alone no FILE is needed.

Nothing is dropped by omission. A record type or an index that the new
schema no longer declares is refused unless named with --allow-drop: a type
by its full name (shop.User; dropping it deletes its records), an index by
its type and index name (shop.User.email; dropping it deletes its entries
and, for a unique index, its constraint). A refusal lists everything that
would be dropped and the --allow-drop flags that allow it.

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
background, and serves reads once built) and dropped (with those of dropped
types), and the files. With --dry-run the server only plans. A schema that
does not compile is refused with every problem as file:line:col: message.`,
		Example: `  protobase schema apply shop.proto
  protobase schema apply --dry-run ./schema
  protobase schema apply --add inventory.proto
  protobase schema apply --add --remove legacy.proto
  protobase schema apply --allow-drop shop.LegacyOrder --allow-drop shop.User.email shop.proto`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(o.remove) == 0 {
				return exitstatus.Usagef("schema apply needs at least one FILE or DIR (or --add --remove FILE)")
			}
			if len(o.remove) > 0 && !o.add {
				return exitstatus.Usagef("--remove needs --add: without --add the files given are the whole schema, and a file is removed by leaving it out")
			}
			return nil
		},
		RunE: exitstatus.RunE(func(cmd *cobra.Command, args []string) error { return a.schemaApply(cmd, args, o) }),
	}
	f := cmd.Flags()
	f.BoolVar(&o.dryRun, "dry-run", false, "plan only, change nothing")
	f.StringArrayVar(&o.allowDrop, "allow-drop", nil, "record type (shop.User) or index (shop.User.email) that may be dropped with its data (repeatable)")
	f.StringVar(&o.root, "root", "", "directory the import paths are relative to (default: each file's own directory)")
	f.BoolVar(&o.add, "add", false, "add the files to the schema (replacing files of the same import path), keeping every other file")
	f.StringArrayVar(&o.remove, "remove", nil, "import path of a file to remove (with --add; repeatable)")
	return cmd
}

func (a *app) schemaApply(cmd *cobra.Command, args []string, o schemaApplyOptions) error {
	files := map[string]string{}
	if len(args) > 0 {
		var err error
		if files, err = readProtoFiles(args, o.root); err != nil {
			return err
		}
	}
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.ApplySchema(cmd.Context(), files, client.SchemaOptions{
		DryRun: o.dryRun, AllowDrop: o.allowDrop, Add: o.add, Remove: o.remove,
	})
	if err != nil {
		if names := refusedDrops(err); len(names) > 0 {
			return fmt.Errorf("%w\nnothing was changed; to drop them with their data, add: --allow-drop %s",
				callError("schema apply", a.conn.Addr, err), strings.Join(names, " --allow-drop "))
		}
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

// refusedDrops returns the names (for --allow-drop) of the types and
// indexes whose drop the server refused because they were not allowed.
func refusedDrops(err error) []string {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return nil
	}
	var names []string
	for _, d := range st.Details() {
		br, ok := d.(*errdetails.BadRequest)
		if !ok {
			continue
		}
		for _, v := range br.GetFieldViolations() {
			if !strings.Contains(v.GetDescription(), "in allow_drop") {
				continue
			}
			_, name, ok := strings.Cut(v.GetField(), " ") // "type shop.User", "index shop.User.email"
			if ok {
				names = append(names, name)
			}
		}
	}
	return names
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
	if ix.GetAggregate() {
		s = fmt.Sprintf("%s aggregate index %s group by (%s) sum (%s)", ix.GetType(), ix.GetIndex(),
			strings.Join(ix.GetFields(), ", "), strings.Join(ix.GetSum(), ", "))
	}
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
