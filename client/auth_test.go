package client

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/server"
)

// TestAPIKeyNeedsTLSOffLoopback checks that a key is never sent over
// plaintext to an address that is not loopback: the credentials are told
// the target is remote, and the call over the (plaintext, loopback)
// connection fails before anything is sent.
func TestAPIKeyNeedsTLSOffLoopback(t *testing.T) {
	key, _ := auth.GenerateKey()
	srv, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", Auth: true, AdminKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	c, err := Dial(srv.Addr(), WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListKeys(context.Background()); err != nil {
		t.Fatalf("key over loopback plaintext: %v", err)
	}

	remote := newAPIKeyCreds(key, "10.1.2.3:7070")
	c2, err := Dial(srv.Addr(), WithDialOptions(grpc.WithPerRPCCredentials(remote)))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c2.ListKeys(context.Background())
	if err == nil || !strings.Contains(err.Error(), errPlaintextKey.Error()) {
		t.Fatalf("key over plaintext to a remote address: %v", err)
	}
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "localhost:7070": true, "[::1]:1": true, "db.internal:7070": false, "0.0.0.0:1": false} {
		if got := auth.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}
