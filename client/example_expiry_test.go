package client_test

import (
	"context"
	"fmt"

	"github.com/protobase/protobase/client"
)

// sessionProto declares a record type whose records expire at the
// Timestamp in expires_at.
const sessionProto = `syntax = "proto3";
package auth;
import "protobase/v1/options.proto";
import "google/protobuf/timestamp.proto";

message Session {
  option (protobase.v1.record) = { primary_key: "id" ttl: { field: "expires_at" } };
  string id = 1;
  google.protobuf.Timestamp expires_at = 2;
}
`

// A record whose expiry has passed reads as absent at once; the reaper
// deletes it within --ttl-reap-interval (default 1s), and watchers see a
// remove marked expired.
func ExampleClient_Watch_expired() {
	c, stop := startExample()
	defer stop()
	ctx := context.Background()
	if _, err := c.ApplySchema(ctx, map[string]string{"auth.proto": sessionProto}, client.SchemaOptions{Add: true}); err != nil {
		fmt.Println(err)
		return
	}
	w, _ := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	_ = w.WriteJSON("auth.Session", []byte(`{"id": "s1", "expires_at": "2000-01-01T00:00:00Z"}`))
	_ = w.WriteJSON("auth.Session", []byte(`{"id": "s2", "expires_at": "2999-01-01T00:00:00Z"}`))
	ack, err := w.Close()
	if err != nil {
		fmt.Println(err)
		return
	}
	recs, _ := c.Get(ctx, "auth.Session", "s1", "s2")
	for i, r := range recs {
		if r == nil {
			fmt.Printf("read %d: absent\n", i)
			continue
		}
		js, _ := c.JSON(ctx, r)
		fmt.Printf("read %d: %s\n", i, js)
	}

	wt, err := c.Watch(ctx, client.WatchOptions{Types: []string{"auth.Session"}, Start: client.StartAfterCommit(ack.Position)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer wt.Close()
	wt.Next()
	ch := wt.Change()
	key, _ := c.JSON(ctx, ch.Key)
	fmt.Println(ch.Op, string(key), "expired:", ch.GetExpired())
	// Output:
	// read 0: absent
	// read 1: {"id":"s2","expiresAt":"2999-01-01T00:00:00Z"}
	// CHANGE_OP_REMOVE {"id":"s1"} expired: true
}
