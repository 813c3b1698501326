package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// An optimistic update: read a record with its version, then write it on
// condition that it is still at that version. Of two writers that read the
// same version, the first applies and the second gets Aborted, naming the
// condition and the version it found; it reads again and retries.
func ExampleIfVersion() {
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
	if _, err := c.Apply(ctx, client.Batch{Op: client.Insert, Records: []proto.Message{user(1, "ann@example.com")}}); err != nil {
		log.Fatal(err)
	}

	_, vers, err := c.GetVersioned(ctx, "shop.User", 1)
	if err != nil {
		log.Fatal(err)
	}
	update := func(email string) error {
		_, err := c.Apply(ctx, client.Batch{Op: client.Update, Records: []proto.Message{user(1, email)},
			Conditions: []*pb.Condition{client.IfVersion(0, vers[0])}})
		return err
	}
	fmt.Println("first update:", update("ann@new.example.com"))
	err = update("ann@other.example.com")
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Printf("second update: %v on condition %d, a newer version found: %v\n",
			ce.Status.Code(), ce.Write.GetCondition(), ce.Write.Version > vers[0])
	}

	// A condition on a query: insert only while no user's email starts
	// with "bob@".
	bobs := &pb.Query{Type: "shop.User", Filter: `email prefix "bob@"`}
	for _, id := range []int64{2, 3} {
		_, err := c.Apply(ctx, client.Batch{Op: client.Insert, Records: []proto.Message{user(id, fmt.Sprintf("bob@%d.example.com", id))},
			Conditions: []*pb.Condition{client.IfCount(bobs, 0)}})
		fmt.Printf("insert of user %d: %v\n", id, status.Code(err))
	}
	// Output:
	// first update: <nil>
	// second update: Aborted on condition 0, a newer version found: true
	// insert of user 2: OK
	// insert of user 3: Aborted
}
