package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// The examples of docs/concurrency.md: a docs test checks that every Go
// block of that page is a part of this file, so the page shows code that
// runs.

// accountsProto is the bank.proto of the Python example
// (python/examples/concurrency.py).
const accountsProto = `syntax = "proto3";
package bank;
import "protobase/v1/options.proto";

message Account {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "owner" } };
  int64 id = 1;
  string owner = 2;
  int64 balance = 3;
  int64 visits = 4;
}
`

// account encodes a bank.Account by hand; with generated Go types you
// would pass &bankpb.Account{Id: id, Balance: balance} instead.
func account(id, balance int64) *anypb.Any {
	b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(id))
	b = protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), uint64(balance))
	return &anypb.Any{TypeUrl: "type.googleapis.com/bank.Account", Value: b}
}

// balance decodes a bank.Account's balance by hand (0 for no record).
func balance(rec *anypb.Any) int64 {
	b := rec.GetValue()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		if typ != protowire.VarintType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeVarint(b)
		b = b[n:]
		if num == 3 {
			return int64(v)
		}
	}
	return 0
}

// accounts starts a server on a temporary directory with the accounts
// schema and accounts 1 and 2 holding 100 each; stop ends both.
func accounts() (c *client.Client, stop func()) {
	dir, _ := os.MkdirTemp("", "protobase-example")
	srv, err := server.Start(context.Background(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	c, err = client.Dial(srv.Addr())
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.ApplySchema(ctx, map[string]string{"bank.proto": accountsProto}, client.SchemaOptions{}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Apply(ctx, client.Batch{Op: client.Insert, Records: []proto.Message{account(1, 100), account(2, 100)}}); err != nil {
		log.Fatal(err)
	}
	return c, func() { c.Close(); _ = srv.Stop(); os.RemoveAll(dir) }
}

// A write batch with a condition applies only if the record is still at
// the version read: a lost update becomes an ABORTED error that names the
// condition and the version it found.
func ExampleClient_Apply() {
	c, stop := accounts()
	defer stop()
	ctx := context.Background()

	recs, vers, err := c.GetVersioned(ctx, "bank.Account", 1)
	if err != nil {
		log.Fatal(err) //nolint:gocritic // an example: any failure ends it, temporary files and all
	}
	read := vers[0]
	_, err = c.Apply(ctx, client.Batch{Op: client.Update,
		Records:    []proto.Message{account(1, balance(recs[0])+10)},
		Conditions: []*pb.Condition{client.IfVersion(0, read)}})
	fmt.Println("first update:", err)

	// The same update again: the record is no longer at the version read.
	_, err = c.Apply(ctx, client.Batch{Op: client.Update,
		Records:    []proto.Message{account(1, balance(recs[0])+10)},
		Conditions: []*pb.Condition{client.IfVersion(0, read)}})
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Println("second update:", ce.Status.Code(), "condition", ce.Write.GetCondition(), "found a newer version:", ce.Write.GetVersion() > read)
	}
	// Output:
	// first update: <nil>
	// second update: Aborted condition 0 found a newer version: true
}

// A patch adds to a counter without reading it: concurrent patches never
// conflict, and none is lost.
func ExampleClient_Apply_patch() {
	c, stop := accounts()
	defer stop()
	ctx := context.Background()

	_, err := c.Apply(ctx, client.Batch{Op: client.Patch, Add: []string{"balance"},
		Records: []proto.Message{account(1, -30), account(2, 30)}})
	if err != nil {
		log.Fatal(err) //nolint:gocritic // an example: any failure ends it, temporary files and all
	}
	recs, _ := c.Get(ctx, "bank.Account", 1, 2)
	fmt.Println(balance(recs[0]), balance(recs[1]))
	// Output: 70 130
}

// Transact runs a function as an optimistic transaction: its reads become
// the conditions of one batch with its writes, and a conflict runs it
// again.
func ExampleClient_Transact() {
	c, stop := accounts()
	defer stop()
	ctx := context.Background()

	move := func(from, to, amount int64) error {
		return c.Transact(ctx, func(tx *client.Tx) error {
			recs, err := tx.Get("bank.Account", from, to)
			if err != nil {
				return err
			}
			if balance(recs[0]) < amount {
				return fmt.Errorf("account %d holds %d, less than %d", from, balance(recs[0]), amount)
			}
			return tx.Update(
				account(from, balance(recs[0])-amount),
				account(to, balance(recs[1])+amount))
		}, client.TxOptions{})
	}
	fmt.Println(move(1, 2, 30))
	fmt.Println(move(1, 2, 300))

	recs, _ := c.Get(ctx, "bank.Account", 1, 2)
	fmt.Println(balance(recs[0]), balance(recs[1]))
	// Output:
	// <nil>
	// account 1 holds 70, less than 300
	// 70 130
}
