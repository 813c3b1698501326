package main

import (
	"context"
	"net"
	"testing"

	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/server"
)

// health answers for a server that requires keys without one (a probe
// holds no secret), ignoring a key in the environment, and fails once the
// server is gone.
func TestHealthCommand(t *testing.T) {
	srv, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", Auth: true})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	addr := srv.Addr()
	t.Setenv("PROTOBASE_API_KEY", "not-a-key")

	r := mustCLI(t, "", "--addr", addr, "health")
	if r.stdout != "SERVING\n" {
		t.Errorf("health printed %q, want SERVING", r.stdout)
	}
	r = mustCLI(t, "", "--addr", addr, "health", "--service", "protobase.v1.Protobase")
	if r.stdout != "SERVING\n" {
		t.Errorf("health --service printed %q, want SERVING", r.stdout)
	}
	r = cli(t, "", "--addr", addr, "health", "--service", "no.such.Service")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "error: health of "+addr+": ", "NotFound")

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "", "--addr", addr, "health", "--timeout", "500ms")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "error: health of "+addr+": ")

	wantCode(t, cli(t, "", "--addr", addr, "health", "--timeout", "0s"), exitstatus.Usage)
	wantCode(t, cli(t, "", "--addr", addr, "health", "extra"), exitstatus.Usage)
}

// A listener that accepts and never speaks gRPC makes health fail within
// its --timeout instead of waiting forever.
func TestHealthTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 16)
	go func() {
		defer close(conns)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	r := cli(t, "", "--addr", lis.Addr().String(), "health", "--timeout", "300ms")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "no answer within 300ms")
	lis.Close()
	for c := range conns {
		c.Close()
	}
}
