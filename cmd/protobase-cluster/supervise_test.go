package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/cluster"
)

// syncBuffer is a bytes.Buffer the supervisor writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until out holds want, failing the test past a minute.
func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the supervisor's output:\n%s", want, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A member or server that dies is reported with its log, and 'restart'
// brings it back on its data.
func TestSuperviseReportsAndRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd cluster and a server")
	}
	dir, err := cluster.BinCache(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bins, err := cluster.Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(t.Context(), bins, t.TempDir(), cluster.Options{Servers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })

	ctx, cancel := context.WithCancel(t.Context())
	in, typed := io.Pipe()
	out := &syncBuffer{}
	done := make(chan struct{})
	go func() { supervise(ctx, c, in, out, 20*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); typed.Close(); <-done })

	s := c.Servers[0]
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "server s1 ("+s.Addr()+") stopped: signal: killed (log "+s.Log+")")
	waitFor(t, out, "type 'restart' and Enter")
	if err := c.Etcd.Kill(1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "etcd member m2 (")
	for _, line := range []string{"status\n", "restart m9\n", "restart\n"} {
		if _, err := io.WriteString(typed, line); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, out, "server s1 ("+s.Addr()+"): stopped")
	waitFor(t, out, `no member or server named "m9"`)
	waitFor(t, out, "etcd member m2 (")
	waitFor(t, out, "server s1 ("+s.Addr()+") restarted")
	if !strings.Contains(out.String(), "etcd member m2 ("+c.Etcd.Endpoints()[1]+") restarted") {
		t.Errorf("m2 not restarted:\n%s", out.String())
	}
	if ended, _ := s.Exited(); ended {
		t.Fatalf("server s1 not running after restart:\n%s", out.String())
	}
	if ended, _ := c.Etcd.Exited(1); ended {
		t.Fatalf("member m2 not running after restart:\n%s", out.String())
	}
	if _, err := io.WriteString(typed, "restart\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "every member and server is running")
}

// 'replace NAME' puts a new member in the place of a stopped one, which
// the supervisor then watches under its new name; a running member is
// not replaced.
func TestSuperviseReplaces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd cluster")
	}
	dir, err := cluster.BinCache(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bins, err := cluster.Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(t.Context(), bins, t.TempDir(), cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Etcd.KillAll)

	ctx, cancel := context.WithCancel(t.Context())
	in, typed := io.Pipe()
	out := &syncBuffer{}
	done := make(chan struct{})
	go func() { supervise(ctx, c, in, out, 20*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); typed.Close(); <-done })

	old := c.Etcd.Members()[1]
	if _, err := io.WriteString(typed, "replace m1\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "etcd member m1 ("+c.Etcd.Endpoints()[0]+") is running: only a stopped member is replaced")
	if err := c.Etcd.Kill(1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "etcd member m2 (")
	if _, err := io.WriteString(typed, "replace m2\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "etcd member m2 ("+strings.TrimPrefix(old.ClientURL, "http://")+") replaced by etcd member m4 (")
	if c.Etcd.Members()[1].Dir == old.Dir {
		t.Errorf("m4 took m2's data directory %s", old.Dir)
	}
	if _, err := io.WriteString(typed, "status\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "etcd member m4 ("+c.Etcd.Endpoints()[1]+"): running")
}
