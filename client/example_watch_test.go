package client_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server"
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
	wt, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartOldest(), OldRecords: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	wt.Next()
	show(wt)
	wt.Close()
	resume := wt.Position()

	// Resumed after the last change read: the rest, once.
	wt, _ = c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartAfter(resume), OldRecords: true})
	for i := 0; i < 2 && wt.Next(); i++ {
		show(wt)
	}
	wt.Close()

	// After the insert's acknowledgement, with a filter.
	wt, _ = c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartAfterCommit(ack.Position), Filter: `email contains ".org"`})
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

	wt, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartOldest(), BatchSize: 2})
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

// A watch outlives its connection: here the server stops (it could as well
// be killed) and starts again on the same data and address, and the watch
// goes on after the last change it delivered, without a gap or a
// duplicate. ResumeFor bounds how long it tries; NoResume turns it off.
func ExampleWatchOptions() {
	dir, _ := os.MkdirTemp("", "protobase-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cfg := server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"}
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.GRPCAddr = srv.Addr() // the same address after the restart
	// Calls wait for the server to be back rather than fail at once.
	c, _ := client.Dial(srv.Addr(), client.WithDialOptions(grpc.WithDefaultCallOptions(grpc.WaitForReady(true))))
	defer c.Close()
	if _, err := c.ApplySchema(ctx, map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	insert := func(id int64) {
		w, _ := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
		_ = w.WriteAny(user(id, fmt.Sprintf("u%d@example.com", id)))
		if _, err := w.Close(); err != nil {
			fmt.Println(err)
		}
	}
	insert(1)
	insert(2)

	wt, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartOldest(), ResumeFor: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer wt.Close()
	show := func() {
		rec, _ := c.JSON(ctx, wt.Change().Record)
		fmt.Printf("%v %s\n", wt.Change().Op, rec)
	}
	wt.Next()
	show()

	_ = srv.Stop() // the watch's stream ends with UNAVAILABLE
	if srv, err = server.Start(ctx, cfg); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = srv.Stop() }()
	insert(3)

	for range 2 {
		wt.Next()
		show()
	}
	fmt.Println("new streams:", wt.Resumes())
	// Output:
	// CHANGE_OP_INSERT {"id":"1","email":"u1@example.com"}
	// CHANGE_OP_INSERT {"id":"2","email":"u2@example.com"}
	// CHANGE_OP_INSERT {"id":"3","email":"u3@example.com"}
	// new streams: 1
}
