package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/exitstatus"
)

func (a *app) keysCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke API keys (admin key required)",
		Long: `A server that requires authentication (serve --auth, or any listener not on
loopback) takes an API key on every call. A key has one role: read (search,
scan, query, schema get), write (read and insert, update, upsert, remove),
schema (write and schema apply) or admin (schema, these commands, the
bench lab, and backup for a key without --types). --types limits a key to
record types or package wildcards (shop.User, shop.*). The server keeps
only a hash of each key: a key is shown once, by "keys create", and cannot
be recovered. See docs/security.md.

These commands need an admin key (--api-key or $PROTOBASE_API_KEY); the
first start with authentication writes one to DATA/admin.key. A key
creates, lists and revokes only keys inside its own scope and role: an
admin key with --types 'shop.*' may create a read key for shop.User or an
admin key for shop.*, but not a key without --types or for crm.*, and it
neither sees nor revokes the keys outside shop.* ("no API key named").`,
		Example: `  export PROTOBASE_API_KEY=$(cat protobase-data/admin.key)
  protobase keys create --name ingest --role write --types 'shop.*'
  protobase keys list
  protobase keys revoke ingest`,
	})
	cmd.AddCommand(a.keysCreateCommand(), a.keysListCommand(), a.keysRevokeCommand())
	return cmd
}

func (a *app) keysCreateCommand() *cobra.Command {
	var name, role string
	var types []string
	cmd := &cobra.Command{
		Use:   "create --name NAME --role ROLE [--types T1,T2]",
		Short: "Create an API key and print it (alone, on the last line)",
		Args:  cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			r, err := auth.ParseRole(role)
			if err != nil {
				return exitstatus.UsageError(err)
			}
			if _, err := auth.ParseScope(types); err != nil {
				return exitstatus.UsageError(err)
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := c.CreateKey(cmd.Context(), &pb.CreateKeyRequest{Name: name, Role: r.Proto(), Types: types})
			if err != nil {
				return callError("keys create", a.conn.Addr, err)
			}
			fmt.Fprintf(a.stdout, "created key %q (%s); it is shown only now:\n%s\n", name, describeKey(resp.GetInfo()), resp.GetKey())
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "unique name of the key (letters, digits, '.', '_', '-')")
	f.StringVar(&role, "role", "", "role: read, write, schema or admin")
	f.StringSliceVar(&types, "types", nil, "limit the key to these record types or package wildcards (shop.User,shop.*); default every type (only a key without --types may create such a key)")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func (a *app) keysListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the API keys (names, roles and types; never the keys)",
		Args:  cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := c.ListKeys(cmd.Context())
			if err != nil {
				return callError("keys list", a.conn.Addr, err)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tTYPES\tCREATED")
			for _, k := range resp.GetKeys() {
				types := strings.Join(k.GetTypes(), ",")
				if types == "" {
					types = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.GetName(), auth.RoleFromProto(k.GetRole()), types,
					time.Unix(k.GetCreatedUnix(), 0).UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		}),
	}
}

func (a *app) keysRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an API key: new calls fail at once, open streams at their next message",
		Args:  cobra.ExactArgs(1),
		RunE: exitstatus.RunE(func(cmd *cobra.Command, args []string) error {
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.RevokeKey(cmd.Context(), args[0]); err != nil {
				return callError("keys revoke", a.conn.Addr, err)
			}
			fmt.Fprintf(a.stdout, "revoked key %q\n", args[0])
			return nil
		}),
	}
}

func describeKey(k *pb.KeyInfo) string {
	s := "role " + auth.RoleFromProto(k.GetRole()).String()
	if len(k.GetTypes()) > 0 {
		s += ", types " + strings.Join(k.GetTypes(), ",")
	}
	return s
}
