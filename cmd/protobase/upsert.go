package main

import (
	"github.com/spf13/cobra"

	"github.com/protobase/protobase/client"
)

func (a *app) upsertCommand() *cobra.Command {
	return a.writeCommand(writeSpec{op: client.Upsert, name: "upsert", done: "upserted"}, &cobra.Command{
		Short: "Insert or replace records from JSON lines",
		Long: `Insert records, replacing those whose primary key already exists (whole
records: a field left out is cleared).`,
		Example: `  protobase upsert --type shop.User users.jsonl
  cat users-*.jsonl | protobase upsert -t shop.User`,
	})
}
