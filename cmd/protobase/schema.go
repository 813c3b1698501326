package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/exitstatus"
)

func (a *app) schemaCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "schema",
		Short: "Apply or show the schema of record types",
		Long: `The schema is a set of .proto files. Messages carrying the option
(protobase.v1.record) are record types, with a primary key and secondary
indexes; files import "protobase/v1/options.proto" to declare them.

"schema apply" replaces the whole schema with the given files, or with
--add adds them to it, and prints the plan; "schema get" prints the
current one.`,
		Example: `  protobase schema apply shop.proto
  protobase schema apply --add inventory.proto
  protobase schema get`,
	})
	cmd.AddCommand(a.schemaApplyCommand(), a.schemaGetCommand())
	return cmd
}

// dial connects to the server at --addr, over TLS when --tls-ca asks for
// it, with the API key of --api-key or $PROTOBASE_API_KEY, if any.
func (a *app) dial() (*client.Client, error) {
	opts, err := a.conn.Options()
	if err != nil {
		return nil, exitstatus.UsageError(err)
	}
	c, err := client.Dial(a.conn.Addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}
