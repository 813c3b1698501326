// Package servertest runs a Protobase server in a child process of a test
// binary, so that a test can kill it with SIGKILL (which no in-process
// server survives to be inspected) and start it again on the same data
// directory. A test package wires it in through its TestMain:
//
//	func TestMain(m *testing.M) { servertest.Main(m, server.Config{}) }
package servertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/protobase/protobase/server"
)

// envDir carries the data directory to the child and marks a process as one.
const envDir = "PROTOBASE_TEST_CHILD_DATA"

// envEtcd carries the child's server.EtcdConfig (JSON) when it serves a
// store on etcd.
const envEtcd = "PROTOBASE_TEST_CHILD_ETCD"

// Main runs the tests of m, unless this process is a child that Start
// began: then it serves cfg, on the parent's data directory and a free
// loopback port, until SIGTERM or SIGINT (or until it is killed).
func Main(m *testing.M, cfg server.Config) {
	dir := os.Getenv(envDir)
	if dir == "" {
		os.Exit(m.Run())
	}
	cfg.DataDir, cfg.GRPCAddr = dir, "127.0.0.1:0"
	if e := os.Getenv(envEtcd); e != "" {
		cfg.Store = server.StoreEtcd
		if err := json.Unmarshal([]byte(e), &cfg.Etcd); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
	}
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("ADDR", srv.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	_ = srv.Stop()
}

// Start runs a server in a child process on dir and returns the process
// and the server's gRPC address once it serves. The test's cleanup kills
// the child if it still runs.
func Start(t testing.TB, dir string) (*exec.Cmd, string) {
	t.Helper()
	return StartWith(t, server.Config{DataDir: dir})
}

// StartWith is Start on the store cfg names: its DataDir, and with Store
// "etcd" its Etcd settings. Other fields are the ones Main was given.
func StartWith(t testing.TB, cfg server.Config) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envDir+"="+cfg.DataDir)
	if cfg.Store == server.StoreEtcd {
		e, err := json.Marshal(cfg.Etcd)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, envEtcd+"="+string(e))
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ADDR ") {
		t.Fatalf("child server did not start: %q %v", line, err)
	}
	return cmd, strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
}
