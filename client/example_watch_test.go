package client_test

import (
	"context"
	"fmt"

	"github.com/protobase/protobase/client"
)

// A watch streams committed changes in commit order. It resumes where a
// write's acknowledgement left off (StartAfterCommit), or where an earlier
// watch stopped (StartAfter its Position): every later change once.
func ExampleClient_Watch() {
	c, stop := startExample()
	defer stop()
	ctx := context.Background()

	w, _ := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	_ = w.WriteAny(user(1, "ann@example.com"))
	_ = w.WriteAny(user(2, "bob@example.com"))
	ack, err := w.Close() // durable; ack.Position is the commit
	if err != nil {
		fmt.Println(err)
		return
	}
	w, _ = c.NewWriter(ctx, client.Upsert, client.WriterOptions{})
	_ = w.WriteAny(user(2, "bob@example.org"))
	if _, err := w.Close(); err != nil {
		fmt.Println(err)
		return
	}

	show := func(wt *client.Watcher) {
		ch := wt.Change()
		rec, _ := c.JSON(ctx, ch.Record)
		line := fmt.Sprintf("%v %s", ch.Op, rec)
		if ch.OldRecord != nil {
			old, _ := c.JSON(ctx, ch.OldRecord)
			line += fmt.Sprintf(" (was %s)", old)
		}
		fmt.Println(line)
	}

	// Everything the server keeps, then stop after the first change.
	wt, err := c.Watch(ctx, client.WatchOptions{Types: []string{"demo.User"}, Start: client.StartOldest(), OldRecords: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	wt.Next()
	show(wt)
	wt.Close()
	resume := wt.Position()

	// Resumed after the last change read: the rest, once.
	wt, _ = c.Watch(ctx, client.WatchOptions{Types: []string{"demo.User"}, Start: client.StartAfter(resume), OldRecords: true})
	for i := 0; i < 2 && wt.Next(); i++ {
		show(wt)
	}
	wt.Close()

	// After the insert's acknowledgement, with a filter.
	wt, _ = c.Watch(ctx, client.WatchOptions{Types: []string{"demo.User"}, Start: client.StartAfterCommit(ack.Position), Filter: `email contains ".org"`})
	wt.Next()
	show(wt)
	wt.Close()
	fmt.Println("err after Close:", wt.Err())
	// Output:
	// CHANGE_OP_INSERT {"id":"1","email":"ann@example.com"}
	// CHANGE_OP_INSERT {"id":"2","email":"bob@example.com"}
	// CHANGE_OP_UPDATE {"id":"2","email":"bob@example.org"} (was {"id":"2","email":"bob@example.com"})
	// CHANGE_OP_UPDATE {"id":"2","email":"bob@example.org"}
	// err after Close: <nil>
}
