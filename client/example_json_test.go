package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// startExample starts a server in a temporary directory, connects to it
// and applies the shop schema; stop ends it all.
func startExample() (c *client.Client, stop func()) {
	dir, err := os.MkdirTemp("", "protobase-example")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.Start(context.Background(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	c, err = client.Dial(srv.Addr())
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.ApplySchema(context.Background(), map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		log.Fatal(err)
	}
	return c, func() {
		c.Close()
		_ = srv.Stop()
		os.RemoveAll(dir)
	}
}

// Without generated code: records go in as JSON, converted with the
// server's own schema, and come out as JSON; Get reads them by key.
func ExampleWriter_WriteJSON() {
	c, stop := startExample()
	defer stop()
	ctx := context.Background()

	w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 1; i <= 3; i++ {
		if err := w.WriteJSON("shop.User", fmt.Appendf(nil, `{"id": %d, "email": "user%d@example.com"}`, i, i)); err != nil {
			fmt.Println(err)
			return
		}
	}
	err = w.WriteJSON("shop.User", []byte(`{"id": 4, "nickname": "Al"}`))
	fmt.Println(`unknown field "nickname":`, strings.Contains(fmt.Sprint(err), `unknown field "nickname"`))
	if _, err := w.Close(); err != nil {
		fmt.Println(err)
		return
	}

	recs, err := c.Get(ctx, "shop.User", 2, 9, int64(3))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range recs {
		if r == nil {
			fmt.Println("not found")
			continue
		}
		js, _ := c.JSON(ctx, r)
		fmt.Println(string(js))
	}
	// Output:
	// unknown field "nickname": true
	// {"id":"2","email":"user2@example.com"}
	// not found
	// {"id":"3","email":"user3@example.com"}
}

// Filters are text, parsed by the server, or trees built with the
// expression helpers; both mean the same.
func ExampleEq() {
	c, stop := startExample()
	defer stop()
	ctx := context.Background()
	w, _ := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	for i := 1; i <= 10; i++ {
		_ = w.WriteJSON("shop.User", fmt.Appendf(nil, `{"id": %d, "email": "user%d@example.com"}`, i, i))
	}
	if _, err := w.Close(); err != nil {
		fmt.Println(err)
		return
	}

	text, _ := c.Query(ctx, &pb.Query{Type: "shop.User", Filter: `id >= 4 and email prefix "user1"`}, 0, "")
	tree, _ := c.Query(ctx, &pb.Query{Type: "shop.User", Where: client.And(client.Ge("id", 4), client.Prefix("email", "user1"))}, 0, "")
	fmt.Println(len(text.Records), len(tree.Records))

	_, err := c.Query(ctx, &pb.Query{Type: "shop.User", Filter: `id >= `}, 0, "")
	fmt.Println(err)
	// Output:
	// 1 1
	// InvalidArgument: filter: column 7: expected value after ">=", found end of input
}
