package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/server"
)

// shopProto is the schema of most tests: one record type with a unique
// secondary index.
const shopProto = testschema.ShopEmail

// startServer starts a server on a free port with its data in a temporary
// directory, stopped when the test ends.
func startServer(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop server: %v", err)
		}
	})
	return srv
}

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command line with stdin and returns what it printed.
func cli(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// mustCLI runs the command line and fails the test unless it exits 0.
func mustCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := cli(t, stdin, args...)
	if r.code != exitstatus.OK {
		t.Fatalf("protobase %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// wantCode fails the test unless r exited with code.
func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// wantContains fails the test unless s holds every one of subs.
func wantContains(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("output lacks %q:\n%s", sub, s)
		}
	}
}

// writeFile writes a file under dir (creating directories) and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// applyShop applies shopProto to the server at addr.
func applyShop(t *testing.T, addr string) {
	t.Helper()
	p := writeFile(t, t.TempDir(), "shop.proto", shopProto)
	mustCLI(t, "", "--addr", addr, "schema", "apply", p)
}

// users returns the stored shop.User records as "id:name:email", sorted.
func users(t *testing.T, srv *server.Server) []string {
	t.Helper()
	c, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rt, err := loadRecordType(t.Context(), c, srv.Addr(), "shop.User")
	if err != nil {
		t.Fatal(err)
	}
	field := func(m protoreflect.Message, name string) protoreflect.Value {
		return m.Get(rt.md.Fields().ByName(protoreflect.Name(name)))
	}
	var out []string
	sc := c.Scan(t.Context(), &pb.Query{Type: "shop.User"}, client.ScanOptions{})
	for sc.Next() {
		m := dynamicpb.NewMessage(rt.md)
		if err := proto.Unmarshal(sc.Record().GetValue(), m); err != nil {
			t.Fatalf("decode record: %v", err)
		}
		out = append(out, field(m, "id").String()+":"+field(m, "name").String()+":"+field(m, "email").String())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
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

var _ io.Writer = (*syncBuffer)(nil)

func TestUsageErrors(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	for _, args := range [][]string{
		{"bogus"},
		{"--bogus-flag"},
		{"schema", "bogus"},
		{"schema", "apply"},
		{"schema", "get", "--format", "yaml"},
		{"schema", "get", "extra-arg"},
		{"--addr", addr, "insert"}, // --type is required
		{"--addr", addr, "insert", "--type", "shop.User", "--batch", "x"},       // not a number
		{"--addr", addr, "insert", "--type", "shop.User", "--batch", "0"},       // not positive
		{"--addr", addr, "upsert", "--type", "shop.User", "a.jsonl", "b.jsonl"}, // one input at most
		{"serve", "--log-level", "loud"},
		{"serve", "--max-batch-records", "-1"},
		{"serve", "--memtable-bytes", "-1"},
		{"serve", "--cache-bytes", "lots"},
		{"serve", "extra-arg"},
		{"version", "extra-arg"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cli(t, "", args...)
			wantCode(t, r, exitstatus.Usage)
			wantContains(t, r.stderr, "error: ", "--help' for usage")
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"--help"},
		{"schema"},
		{"serve", "--help"},
		{"schema", "apply", "--help"},
		{"insert", "--help"},
		{"remove", "--help"},
	} {
		r := mustCLI(t, "", args...)
		wantContains(t, r.stdout, "Usage:", "Examples:")
	}
	r := mustCLI(t, "", "serve", "--help")
	wantContains(t, r.stdout, "--sync", "risks losing acknowledged writes")
	// The memory defaults are stated, with what they come to here.
	wantContains(t, r.stdout, "--cache-bytes", "1/8 of the memory available", "--memtable-bytes", "1/64 of the memory available", " here)")
}

func TestVersion(t *testing.T) {
	r := mustCLI(t, "", "version")
	if !strings.HasPrefix(r.stdout, "protobase ") {
		t.Errorf("version printed %q", r.stdout)
	}
}

func TestUnreachableServer(t *testing.T) {
	// Port 1 on loopback: nothing listens there.
	r := cli(t, "", "--addr", "127.0.0.1:1", "schema", "get")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "schema get: the server at 127.0.0.1:1 is unavailable")
}

func TestAddrFromEnvironment(t *testing.T) {
	srv := startServer(t)
	t.Setenv("PROTOBASE_ADDR", srv.Addr())
	r := mustCLI(t, "", "schema", "get")
	wantContains(t, r.stdout, "schema version 0")

	// The flag wins over the environment.
	r = cli(t, "", "--addr", "127.0.0.1:1", "schema", "get")
	wantCode(t, r, exitstatus.Failed)
}
