package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// shopProto is the README's shop.proto, the schema of every example.
const shopProto = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";

message User {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true }
    index: { fields: "name" }
  };
  int64 id = 1;
  string name = 2;
  string email = 3;
  int32 age = 4;
}
`

// user encodes a shop.User by hand; with generated Go types you would call
// Writer.Write(&shoppb.User{...}) instead.
func user(id int64, email string) *anypb.Any {
	b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(id))
	b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), email)
	return &anypb.Any{TypeUrl: "type.googleapis.com/shop.User", Value: b}
}

func Example() {
	dir, _ := os.MkdirTemp("", "protobase-example")
	defer os.RemoveAll(dir)
	srv, err := server.Start(context.Background(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err) //nolint:gocritic // an example: any failure ends it, temporary files and all
	}
	defer srv.Stop()

	ctx := context.Background()
	c, err := client.Dial(srv.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	plan, err := c.ApplySchema(ctx, map[string]string{"shop.proto": shopProto}, client.SchemaOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("added:", plan.Plan.TypesAdded)

	w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{BatchRecords: 500})
	if err != nil {
		log.Fatal(err)
	}
	for i := int64(1); i <= 1000; i++ {
		if err := w.WriteAny(user(i, fmt.Sprintf("user%d@example.com", i))); err != nil {
			log.Fatal(err)
		}
	}
	ack, err := w.Close() // flushes and waits until every batch is durable
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("durable records:", ack.Records)

	// A constraint violation names the batch, the record and the field.
	w, _ = c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	_ = w.WriteAny(user(1001, "new@example.com"))
	_ = w.WriteAny(user(1002, "user7@example.com"))
	_, err = w.Close()
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Printf("%v: batch %d, record %d, field %s\n", ce.Status.Code(), ce.Write.Batch, ce.Write.Record, ce.Write.Field)
	}
	// Output:
	// added: [shop.User]
	// durable records: 1000
	// AlreadyExists: batch 0, record 1, field email
}

// Many queries travel on one Search stream, batched into one request; each
// has its own Results, readable in any order. Scan streams every match,
// read in parallel on the server; Query pages resume from a token.
func ExampleSearch() {
	dir, _ := os.MkdirTemp("", "protobase-example")
	defer os.RemoveAll(dir)
	srv, err := server.Start(context.Background(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err) //nolint:gocritic // an example: any failure ends it, temporary files and all
	}
	defer srv.Stop()
	ctx := context.Background()
	c, err := client.Dial(srv.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ApplySchema(ctx, map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		log.Fatal(err)
	}
	w, _ := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	for i := int64(1); i <= 100; i++ {
		_ = w.WriteAny(user(i, fmt.Sprintf("user%d@example.com", i)))
	}
	if _, err := w.Close(); err != nil {
		log.Fatal(err)
	}

	s, err := c.NewSearch(ctx)
	if err != nil {
		log.Fatal(err)
	}
	rs, err := s.Batch([]*pb.Query{
		{Type: "shop.User", Where: client.Eq("id", 7)},
		{Type: "shop.User", Where: client.Eq("id", 1000)}, // no such user
		{Type: "shop.User", Where: client.Eq("nope", 1)},  // fails alone
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rs {
		recs, err := r.All()
		fmt.Printf("query %d: %d record(s), err: %v\n", r.ID(), len(recs), err)
	}
	_ = s.Close()

	sc := c.Scan(ctx, &pb.Query{Type: "shop.User"}, client.ScanOptions{Parallelism: 4})
	n := 0
	for sc.Next() {
		n++
	}
	fmt.Println("scanned:", n, sc.Err())

	pages := 0
	_ = c.Pages(ctx, &pb.Query{Type: "shop.User"}, 30, func(p *client.Page) bool {
		pages++
		return true
	})
	fmt.Println("pages of 30:", pages)
	// Output:
	// query 0: 1 record(s), err: <nil>
	// query 1: 0 record(s), err: <nil>
	// query 2: 0 record(s), err: query 2: InvalidArgument: field nope: no field "nope" in shop.User
	// scanned: 100 <nil>
	// pages of 30: 4
}

// A server started with TLS (serve --tls-cert/--tls-key) is reached with
// the CA that issued its certificate; add a client certificate and key when
// it requires one (serve --tls-client-ca).
func ExampleWithTLS() {
	cfg, err := client.TLSConfig("ca.pem", "", "")
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial("db.internal:7070", client.WithTLS(cfg))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}
