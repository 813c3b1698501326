package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/protobase/protobase/internal/exitstatus"
)

func TestServeTransportFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--nats", "--nats-url", "nats://x:4222"}, "exclusive"},
		{[]string{"--nats-addr", "127.0.0.1:0"}, "--nats-addr is the embedded NATS server's address: it needs --nats"},
		{[]string{"--nats-prefix", "shop"}, "need --nats or --nats-url"},
		{[]string{"--nats", "--nats-prefix", "shop.*"}, "--nats-prefix"},
		{[]string{"--nats", "--nats-prefix", "a..b"}, "--nats-prefix"},
		{[]string{"--nats", "--nats-queue", "q 1"}, "--nats-queue"},
		{[]string{"--nats", "--nats-addr", ""}, "--nats-addr must not be empty"},
		{[]string{"--http-addr", ""}, "--http-addr must not be empty"},
	}
	for _, tc := range cases {
		r := cli(t, "", append([]string{"serve", "--data", t.TempDir()}, tc.args...)...)
		wantCode(t, r, exitstatus.Usage)
		wantContains(t, r.stderr, tc.want)
	}
	r := cli(t, "", "serve", "--data", t.TempDir(), "--grpc-addr", "127.0.0.1:0", "--http-addr", "not-an-address")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "cannot start the server", "not-an-address")
}

func TestServeTransports(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	args := []string{"serve", "--data", t.TempDir(), "--sync=false", "--grpc-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--nats", "--nats-addr", "127.0.0.1:0", "--nats-prefix", "pb.test", "--nats-queue", "q1"}
	go func() { done <- run(ctx, args, strings.NewReader(""), &stdout, &stderr) }()
	re := regexp.MustCompile(`(?s)REST/JSON on (http://\S+) .*NATS on (\S+) \(subjects pb\.test\.\*, queue group q1\)`)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m = re.FindStringSubmatch(stdout.String())
	}
	if m == nil {
		t.Fatalf("serve printed no transports\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	resp, err := http.Get(m[1] + "/v1/schema")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/schema: %d %s", resp.StatusCode, b)
	}
	nc, err := nats.Connect(m[2])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg := nats.NewMsg("pb.test.schema.get")
	msg.Header.Set("Content-Type", "application/json")
	reply, err := nc.RequestMsg(msg, 5*time.Second)
	if err != nil || reply.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("schema.get over NATS: %v %v", reply, err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d\n%s", code, stderr.String())
	}
}
