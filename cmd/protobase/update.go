package main

import (
	"github.com/spf13/cobra"

	"github.com/protobase/protobase/client"
)

func (a *app) updateCommand() *cobra.Command {
	return a.writeCommand(writeSpec{op: client.Update, name: "update", done: "updated"}, &cobra.Command{
		Short: "Replace existing records from JSON lines",
		Long: `Replace existing records, found by primary key, with the records given
(whole records: a field left out is cleared). A record whose primary key
does not exist fails the write with NotFound.`,
		Example: `  protobase update --type shop.User changed-users.jsonl
  echo '{"id": 1, "name": "Ada Lovelace", "email": "ada@example.com"}' | protobase update -t shop.User`,
	})
}
