package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
)

func (a *app) schemaGetCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Print the current schema",
		Long: `Print the server's current schema. The text format shows the schema
version, the record types with their primary keys, ttl fields and indexes
(and the state of each index; a type with a ttl option has its expiry
index, "(ttl)"), then every file by import path with its source.

The json format prints the whole GetSchema response as protobuf JSON,
including "descriptors", the compiled FileDescriptorSet of the schema and
the imports its types use (not those used only for options), for tools
that convert records to and from JSON.`,
		Example: `  protobase schema get
  protobase schema get --format json | jq -r '.files["shop.proto"]'`,
		Args: cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return exitstatus.Usagef("--format %q: want text or json", format)
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := c.GetSchema(cmd.Context())
			if err != nil {
				return callError("schema get", a.conn.Addr, err)
			}
			if format == "json" {
				b, err := stableJSON(protojson.MarshalOptions{}, resp, "  ")
				if err != nil {
					return fmt.Errorf("encode the schema as JSON: %w", err)
				}
				_, err = fmt.Fprintf(a.stdout, "%s\n", b)
				return err
			}
			return writeSchemaText(a.stdout, resp)
		}),
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func writeSchemaText(w io.Writer, resp *pb.GetSchemaResponse) error {
	fmt.Fprintf(w, "schema version %d\n", resp.GetVersion())
	if len(resp.GetFiles()) == 0 {
		_, err := fmt.Fprintln(w, "no files")
		return err
	}
	if types := resp.GetTypes(); len(types) > 0 {
		fmt.Fprintf(w, "\nrecord types (%d):\n", len(types))
		for _, t := range types {
			fmt.Fprintf(w, "  %s  primary key (%s)\n", t.GetName(), strings.Join(t.GetPrimaryKey(), ", "))
			if ttl := t.GetTtl(); ttl != nil {
				fmt.Fprintf(w, "    ttl %s%s\n", ttl.GetField(), ttlUnit(ttl.GetUnit()))
			}
			for _, ix := range t.GetIndexes() {
				s := fmt.Sprintf("    index %s (%s)", ix.GetName(), strings.Join(ix.GetFields(), ", "))
				if ix.GetAggregate() {
					s = fmt.Sprintf("    aggregate index %s group by (%s) count, sum (%s)", ix.GetName(),
						strings.Join(ix.GetFields(), ", "), strings.Join(ix.GetSum(), ", "))
				}
				if ix.GetUnique() {
					s += " unique"
				}
				s += " " + indexState(ix.GetState())
				if e := ix.GetError(); e != "" {
					s += ": " + e
				}
				fmt.Fprintln(w, s)
			}
		}
	}
	names := make([]string, 0, len(resp.GetFiles()))
	for name := range resp.GetFiles() {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		src := resp.GetFiles()[name]
		fmt.Fprintf(w, "\n--- %s\n%s", name, src)
		if !strings.HasSuffix(src, "\n") {
			fmt.Fprintln(w)
		}
	}
	return nil
}

func indexState(s pb.IndexState) string {
	switch s {
	case pb.IndexState_INDEX_STATE_BUILDING:
		return "building"
	case pb.IndexState_INDEX_STATE_READY:
		return "ready"
	case pb.IndexState_INDEX_STATE_FAILED:
		return "failed"
	}
	return "unknown state"
}

// ttlUnit is how schema get names an integer expiry field's unit.
func ttlUnit(u pb.TTLUnit) string {
	switch u {
	case pb.TTLUnit_TTL_UNIT_SECONDS:
		return " (seconds since the epoch)"
	case pb.TTLUnit_TTL_UNIT_MILLISECONDS:
		return " (milliseconds since the epoch)"
	}
	return ""
}
