package main

import (
	"github.com/spf13/cobra"

	"github.com/protobase/protobase/client"
)

func (a *app) insertCommand() *cobra.Command {
	return a.writeCommand(writeSpec{op: client.Insert, name: "insert", done: "inserted"}, &cobra.Command{
		Short: "Insert records from JSON lines",
		Long: `Insert new records. A record whose primary key already exists fails the
write with AlreadyExists, as does one that breaks a unique index.`,
		Example: `  protobase insert --type shop.User users.jsonl
  echo '{"id": 1, "name": "Ada", "email": "ada@example.com"}' | protobase insert -t shop.User
  protobase insert --type shop.User --batch 5000 - < users.jsonl`,
	})
}
