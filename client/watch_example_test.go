package client_test

import (
	"context"
	"fmt"

	"github.com/protobase/protobase/client"
)

// A consumer of many changes takes them a message at a time: NextBatch
// decodes each message into the storage of the one before, so receiving
// allocates almost nothing. A batch is valid until the next call; keep
// what you need (here a count and the resume point) or proto.Clone it.
func ExampleWatcher_NextBatch() {
	c, stop := startExample()
	defer stop()
	ctx := context.Background()

	w, _ := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	for id := int64(1); id <= 5; id++ {
		_ = w.WriteAny(user(id, fmt.Sprintf("u%d@example.com", id)))
	}
	if _, err := w.Close(); err != nil {
		fmt.Println(err)
		return
	}

	wt, err := c.Watch(ctx, client.WatchOptions{Types: []string{"demo.User"}, Start: client.StartOldest(), BatchSize: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	seen := 0
	for seen < 5 && wt.NextBatch() {
		batch := wt.Batch()
		seen += len(batch)
		fmt.Printf("%d changes, the last %v of %d bytes; resume after %s\n",
			len(batch), batch[len(batch)-1].Op, len(batch[len(batch)-1].Record.GetValue()), client.FormatPosition(wt.Position()))
	}
	wt.Close()
	// Output:
	// 2 changes, the last CHANGE_OP_INSERT of 18 bytes; resume after 1.1
	// 2 changes, the last CHANGE_OP_INSERT of 18 bytes; resume after 1.3
	// 1 changes, the last CHANGE_OP_INSERT of 18 bytes; resume after 1
}
