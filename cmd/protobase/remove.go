package main

import (
	"github.com/spf13/cobra"

	"github.com/protobase/protobase/client"
)

func (a *app) removeCommand() *cobra.Command {
	return a.writeCommand(writeSpec{op: client.Remove, name: "remove", done: "removed"}, &cobra.Command{
		Short: "Delete records by primary key from JSON lines",
		Long: `Delete the records with the primary keys of the records given; fields
outside the primary key are ignored, so each line may hold the key alone.
A primary key that does not exist fails the write with NotFound.`,
		Example: `  echo '{"id": 1}' | protobase remove --type shop.User
  protobase remove --type shop.User users-to-delete.jsonl`,
	})
}
