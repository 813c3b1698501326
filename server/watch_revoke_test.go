package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// A Watch with nothing to send ends with UNAUTHENTICATED when its key is
// revoked, without waiting for a change to check the key at.
func TestWatchEndsAtRevocation(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := e.api("reader").Watch(ctx, &pb.WatchRequest{Types: []string{"shop.User"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the start, sent at once
		t.Fatalf("the watch's first message: %v", err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	if _, err := e.api("admin").RevokeKey(ctx, &pb.RevokeKeyRequest{Name: "reader"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if s := status.Convert(err); s.Code() != codes.Unauthenticated || s.Message() != `API key "reader" was revoked` {
			t.Fatalf("the watch ended with %v, want UNAUTHENTICATED saying the key was revoked", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch of a revoked key was still open 10s after the revocation")
	}
}
