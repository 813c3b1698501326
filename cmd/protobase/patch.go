package main

import (
	"github.com/spf13/cobra"

	"github.com/protobase/protobase/client"
)

func (a *app) patchCommand() *cobra.Command {
	return a.writeCommand(writeSpec{op: client.Patch, name: "patch", done: "patched"}, &cobra.Command{
		Short: "Change some fields of existing records from JSON lines",
		Long: `Change some fields of existing records, found by primary key, keeping
everything else they hold. Each line holds a record's primary key and the
values to write. --fields names the fields every record sets (dotted paths
through message fields, as address.city; a named field the line leaves out
is cleared); --add names numeric fields whose value in the line is added to
the stored value (a stored value that is absent counts as 0), which makes
counters that concurrent writers increment without losing an update. At
least one of them is needed; a field may not be named twice, be in both,
be part of the primary key, or lie under a repeated or map field. The
server applies a patch to the stored bytes: fields the record type does
not know are kept too.

A record that does not exist fails the write with NotFound; an add that
overflows its field's integer type, with OutOfRange naming the field.
Indexes and unique indexes see the patched record. See docs/write.md.`,
		Example: `  echo '{"id": 1, "email": "ada@example.com"}' | protobase patch -t shop.User --fields email
  echo '{"id": 7, "views": 1}' | protobase patch -t shop.Page --add views
  protobase patch -t shop.User --fields name,address.city --if-version 12 change.jsonl`,
	})
}
