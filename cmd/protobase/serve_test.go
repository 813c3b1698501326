package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/exitstatus"
)

func TestServeBadAddress(t *testing.T) {
	r := cli(t, "", "serve", "--data", t.TempDir(), "--grpc-addr", "not-an-address")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "error: cannot start the server: ", "not-an-address")
	if r.stdout != "" {
		t.Errorf("printed %q", r.stdout)
	}
}

func TestServeAddressInUse(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	r := cli(t, "", "serve", "--data", t.TempDir(), "--grpc-addr", lis.Addr().String())
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "error: cannot start the server: ", "address already in use")
}

func TestServeDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, done := startServe(t, ctx, "--data", dir)
	r := cli(t, "", "serve", "--data", dir, "--grpc-addr", "127.0.0.1:0")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "cannot start the server: ", "is another server using the data directory")
	cancel()
	<-done
}

// startServe runs "serve" on a free port until ctx ends and returns the
// address it printed and a channel receiving its exit code.
func startServe(t *testing.T, ctx context.Context, args ...string) (string, <-chan int) {
	t.Helper()
	re := regexp.MustCompile(`protobase serving on (\S+) \((?:data|etcd) .*\)\n`)
	r := runServe(t, ctx, func(stdout string) string {
		if m := re.FindStringSubmatch(stdout); m != nil {
			return m[1]
		}
		return ""
	}, args...)
	return r.addr, r.done
}

// serveRun is a "serve" running on a free port, with its output.
type serveRun struct {
	addr           string
	stdout, stderr syncBuffer
	done           chan int // its exit code
}

// runServe runs "serve" on a free port until ctx ends, and returns once
// addrOf finds the address it serves on in its stdout so far.
func runServe(t *testing.T, ctx context.Context, addrOf func(stdout string) string, args ...string) *serveRun {
	t.Helper()
	r := &serveRun{done: make(chan int, 1)}
	args = append([]string{"serve", "--grpc-addr", "127.0.0.1:0"}, args...)
	go func() { r.done <- run(ctx, args, strings.NewReader(""), &r.stdout, &r.stderr) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if r.addr = addrOf(r.stdout.String()); r.addr != "" {
			return r
		}
		select {
		case code := <-r.done:
			t.Fatalf("serve exited %d\nstdout:\n%s\nstderr:\n%s", code, r.stdout.String(), r.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("serve printed no address\nstdout:\n%s\nstderr:\n%s", r.stdout.String(), r.stderr.String())
	return nil
}

func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startServe(t, ctx, "--data", t.TempDir(), "--sync=false", "--log-level", "debug", "--max-batch-records", "5",
		"--max-aggregate-groups", "2")
	applyShop(t, addr)
	mustCLI(t, `{"id": 1}`, "--addr", addr, "insert", "--type", "shop.User")
	mustCLI(t, "{\"id\": 2, \"email\": \"b@x\"}\n{\"id\": 3, \"email\": \"c@x\"}\n", "--addr", addr, "insert", "--type", "shop.User")

	// --max-aggregate-groups reaches the engine: two groups fit, three
	// do not.
	mustCLI(t, "", "--addr", addr, "query", "--type", "shop.User", "-w", "id <= 2", "--group-by", "id", "--agg", "count()")
	r := cli(t, "", "--addr", addr, "query", "--type", "shop.User", "--group-by", "id", "--agg", "count()")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "ResourceExhausted", "more than 2 groups")

	// --max-batch-records reaches the server, which reports it: the
	// client refuses a larger batch before sending it.
	r = cli(t, strings.Repeat("{\"id\": 9}\n", 6), "--addr", addr, "upsert", "--type", "shop.User", "--batch", "6")
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--batch 6 is over the server's limit of 5 records per batch")

	// Cancelling the context stands in for SIGINT: a clean stop, exit 0.
	cancel()
	select {
	case code := <-done:
		if code != exitstatus.OK {
			t.Fatalf("serve exited %d after shutdown", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// The receive budget's flags refuse values no maximal message fits in,
// naming the flags, from the command line and from the environment.
func TestServeReceiveBudgetFlags(t *testing.T) {
	r := cli(t, "", "serve", "--data", t.TempDir(), "--max-message-bytes", "1000", "--max-receive-bytes-per-conn", "999")
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--max-receive-bytes-per-conn must be at least --max-message-bytes")

	r = cli(t, "", "serve", "--data", t.TempDir(), "--max-receive-buffer-bytes", "-1")
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--max-receive-buffer-bytes must not be negative")

	t.Setenv("PROTOBASE_MAX_RECEIVE_BUFFER_BYTES", "1024")
	r = cli(t, "", "serve", "--data", t.TempDir())
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--max-receive-buffer-bytes must be at least --max-message-bytes")

	r = cli(t, "", "serve", "--help")
	wantContains(t, r.stdout, "--max-receive-buffer-bytes", "[$PROTOBASE_MAX_RECEIVE_BUFFER_BYTES]", "--max-receive-bytes-per-conn")
}

// Sizes and times below what a server can run with, "none" or "off"
// spelled with any other negative number, and NATS subjects that NATS
// reserves are usage errors that create nothing.
func TestServeRefusesOutOfRangeValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--memtable-bytes", "1"}, "--memtable-bytes 1 is too small: want at least 4 MiB"},
		{[]string{"--cache-bytes", "10"}, "--cache-bytes 10 is too small"},
		{[]string{"--record-cache-bytes", "-2"}, "--record-cache-bytes -2: want -1 (no cache)"},
		{[]string{"--go-memory-limit", "-5"}, "--go-memory-limit -5: want -1 (none)"},
		{[]string{"--max-connections", "-3"}, "--max-connections -3: want -1 (no cap)"},
		{[]string{"--watch-retention", "-1h"}, "--watch-retention -1h0m0s: want 0 (no change log) or a positive duration"},
		{[]string{"--watch-retention", "10ms"}, "--watch-retention 10ms is too short: want at least 1s"},
		{[]string{"--watch-retention-bytes", "-1"}, "--watch-retention-bytes -1: want 0"},
		{[]string{"--watch-tail-bytes", "-1"}, "--watch-tail-bytes -1: want 0"},
		{[]string{"--handshake-timeout", "1ns"}, "--handshake-timeout 1ns is too short"},
		{[]string{"--max-message-bytes", "10"}, "--max-message-bytes 10 is too small"},
		{[]string{"--nats", "--nats-addr", "127.0.0.1:0", "--nats-prefix", "$SYS"}, `--nats-prefix "$SYS": want subject tokens`},
		{[]string{"--nats", "--nats-addr", "127.0.0.1:0", "--nats-prefix", "_INBOX.x"}, "not starting with $ or _INBOX"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			// Bounded: a serve that accepts the flags runs until its context ends.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, append([]string{"serve", "--data", dir, "--grpc-addr", "127.0.0.1:0"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
			r := result{code, stdout.String(), stderr.String()}
			wantCode(t, r, exitstatus.Usage)
			wantContains(t, r.stderr, tc.want)
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the refused serve left %s behind: %v", dir, err)
			}
		})
	}
}
