// Package servertest runs Protobase servers for tests: in the test's own
// process with a client (Server, server.go), or in a child process of a test
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

	"github.com/protobase/protobase/internal/freeport"
	"github.com/protobase/protobase/server"
)

// envDir carries the data directory to the child and marks a process as one.
const envDir = "PROTOBASE_TEST_CHILD_DATA"

// envEtcd carries the child's server.EtcdConfig (JSON) when it serves a
// store on etcd.
const envEtcd = "PROTOBASE_TEST_CHILD_ETCD"

// envAddr carries the address the child listens on, when the test chose
// one (StartAt): a server restarted on it is where its clients were.
const envAddr = "PROTOBASE_TEST_CHILD_ADDR"

// envLimits carries the child's Limits (JSON).
const envLimits = "PROTOBASE_TEST_CHILD_LIMITS"

// Limits are the bounds of a child's server a test may set besides its
// store (StartLimited); a zero field keeps what Main was given.
type Limits struct {
	MaxMessageBytes        int
	MaxInflightBytes       int64
	MaxResultBufferBytes   int64
	MaxReceiveBufferBytes  int64
	MaxReceiveBytesPerConn int64
	CacheBytes             int64
	MemTableBytes          int64
	RecordCacheBytes       int64
	GoMemoryLimit          int64
	// AddressSpace, when positive, limits the child's virtual memory
	// (RLIMIT_AS): an allocation past it fails, and the Go runtime ends
	// the process ("fatal error: out of memory").
	AddressSpace uint64
}

// apply sets l's nonzero fields on cfg.
func (l Limits) apply(cfg *server.Config) {
	set := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	if l.MaxMessageBytes != 0 {
		cfg.MaxMessageBytes = l.MaxMessageBytes
	}
	set(&cfg.MaxInflightBytes, l.MaxInflightBytes)
	set(&cfg.MaxResultBufferBytes, l.MaxResultBufferBytes)
	set(&cfg.MaxReceiveBufferBytes, l.MaxReceiveBufferBytes)
	set(&cfg.MaxReceiveBytesPerConn, l.MaxReceiveBytesPerConn)
	set(&cfg.CacheBytes, l.CacheBytes)
	set(&cfg.MemTableBytes, l.MemTableBytes)
	set(&cfg.RecordCacheBytes, l.RecordCacheBytes)
	set(&cfg.GoMemoryLimit, l.GoMemoryLimit)
}

// Main runs the tests of m, unless this process is a child that Start
// began: then it serves cfg, on the parent's data directory and a free
// loopback port, until SIGTERM or SIGINT (or until it is killed).
func Main(m *testing.M, cfg server.Config) {
	dir := os.Getenv(envDir)
	if dir == "" {
		os.Exit(m.Run())
	}
	cfg.DataDir, cfg.GRPCAddr = dir, "127.0.0.1:0"
	if a := os.Getenv(envAddr); a != "" {
		cfg.GRPCAddr = a
	}
	if e := os.Getenv(envLimits); e != "" {
		var l Limits
		if err := json.Unmarshal([]byte(e), &l); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		if l.AddressSpace > 0 {
			lim := &syscall.Rlimit{Cur: l.AddressSpace, Max: l.AddressSpace}
			if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
				fmt.Println("ERROR", err)
				os.Exit(1)
			}
		}
		l.apply(&cfg)
	}
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

// FreeAddr is a loopback address ("127.0.0.1:PORT") for StartAt, on a port
// outside the kernel's ephemeral range (internal/freeport), so that no
// outgoing connection takes it while the server there is down.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// StartAt is Start listening on addr ("127.0.0.1:PORT", see FreeAddr): a
// server killed and started again at the address its clients know.
func StartAt(t testing.TB, dir, addr string) *exec.Cmd {
	t.Helper()
	cmd, _ := start(t, server.Config{DataDir: dir, GRPCAddr: addr}, nil)
	return cmd
}

// StartWith is Start on the store cfg names: its DataDir, with Store
// "etcd" its Etcd settings, and its GRPCAddr when set. Other fields are
// the ones Main was given.
func StartWith(t testing.TB, cfg server.Config) (*exec.Cmd, string) {
	t.Helper()
	return start(t, cfg, nil)
}

// StartLimited is Start on dir with the bounds l.
func StartLimited(t testing.TB, dir string, l Limits) (*exec.Cmd, string) {
	t.Helper()
	return start(t, server.Config{DataDir: dir}, &l)
}

// PeakRSS returns the most resident memory the running process cmd has
// had (VmHWM in /proc/PID/status), in bytes.
func PeakRSS(cmd *exec.Cmd) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", cmd.Process.Pid)
}

func start(t testing.TB, cfg server.Config, l *Limits) (*exec.Cmd, string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envDir+"="+cfg.DataDir)
	if cfg.GRPCAddr != "" {
		cmd.Env = append(cmd.Env, envAddr+"="+cfg.GRPCAddr)
	}
	if l != nil {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, envLimits+"="+string(b))
	}
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
