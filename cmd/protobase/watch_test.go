package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/internal/testschema"
)

const watchShopProto = testschema.ShopEmailOrders

// watchServer starts a server with users and orders, and returns its
// address.
func watchServer(t *testing.T) string {
	t.Helper()
	addr := startServer(t).Addr()
	mustCLI(t, "", "--addr", addr, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", watchShopProto))
	return addr
}

// watching runs protobase watch with args until stop is called, which
// interrupts it (as Ctrl-C does, through its context) and returns what it
// printed and its exit code.
func watching(t *testing.T, args ...string) (out *syncBuffer, stop func() result) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, strings.NewReader(""), &stdout, &stderr) }()
	t.Cleanup(cancel)
	return &stdout, func() result {
		cancel()
		return result{<-done, stdout.String(), stderr.String()}
	}
}

// waitLines waits until out holds n lines; polling a buffer another
// goroutine fills, with a generous deadline.
func waitLines(t *testing.T, out *syncBuffer, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := out.String()
		if strings.Count(s, "\n") >= n {
			return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %d lines; got:\n%s", n, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// change is one printed line.
type change struct {
	Op       string          `json:"op"`
	Type     string          `json:"type"`
	Key      json.RawMessage `json:"key"`
	Position string          `json:"position"`
	Record   json.RawMessage `json:"record"`
	Old      json.RawMessage `json:"old"`
	Progress string          `json:"progress"`
}

func parseChanges(t *testing.T, lines []string) []change {
	t.Helper()
	var out []change
	for _, l := range lines {
		var c change
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, c)
	}
	return out
}

var positionText = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

func TestWatchCommand(t *testing.T) {
	addr := watchServer(t)
	mustCLI(t, `{"id": 0, "name": "zero", "email": "z@x"}`+"\n"+`{"id": 1, "name": "ann", "email": "a@x"}`, "--addr", addr, "insert", "--type", "shop.User")
	mustCLI(t, `{"id": 1, "name": "ann", "email": "ann@x"}`, "--addr", addr, "upsert", "--type", "shop.User")

	out, stop := watching(t, "--addr", addr, "watch", "-t", "shop.User", "--type", "shop.Order", "--from", "oldest", "--old")
	waitLines(t, out, 3)
	// Changes made while it watches arrive too.
	mustCLI(t, `{"id": 7, "user": 1, "total": 9.5}`, "--addr", addr, "insert", "--type", "shop.Order")
	mustCLI(t, `{"id": 0}`, "--addr", addr, "remove", "--type", "shop.User")
	lines := waitLines(t, out, 5)
	r := stop()
	if r.code != exitstatus.OK {
		t.Fatalf("interrupted watch: exit %d, stderr %q", r.code, r.stderr)
	}
	got := parseChanges(t, lines)
	want := []struct{ op, typ, key, record, old string }{
		{"CHANGE_OP_INSERT", "shop.User", `{"id":"0"}`, `{"name":"zero","email":"z@x"}`, ``},
		{"CHANGE_OP_INSERT", "shop.User", `{"id":"1"}`, `{"id":"1","name":"ann","email":"a@x"}`, ``},
		{"CHANGE_OP_UPDATE", "shop.User", `{"id":"1"}`, `{"id":"1","name":"ann","email":"ann@x"}`, `{"id":"1","name":"ann","email":"a@x"}`},
		{"CHANGE_OP_INSERT", "shop.Order", `{"id":"7"}`, `{"id":"7","user":"1","total":9.5}`, ``},
		{"CHANGE_OP_REMOVE", "shop.User", `{"id":"0"}`, ``, `{"name":"zero","email":"z@x"}`},
	}
	for i, w := range want {
		c := got[i]
		if c.Op != w.op || c.Type != w.typ || string(c.Key) != w.key || string(c.Record) != w.record || string(c.Old) != w.old || !positionText.MatchString(c.Position) {
			t.Errorf("line %d: %s\nwant %+v", i, lines[i], w)
		}
	}

	// Resumed from the third line's position: the fourth and the fifth.
	out, stop = watching(t, "--addr", addr, "watch", "-t", "shop.User", "-t", "shop.Order", "--from", got[2].Position)
	again := parseChanges(t, waitLines(t, out, 2))
	stop()
	if again[0].Position != got[3].Position || again[1].Position != got[4].Position || again[1].Old != nil {
		t.Errorf("resumed after %s: %+v", got[2].Position, again)
	}

	// A field added to the schema while it watches prints too.
	// (The first progress line says the command has its schema.)
	out, stop = watching(t, "--addr", addr, "watch", "-t", "shop.User", "--from", got[4].Position, "--progress")
	waitLines(t, out, 1)
	mustCLI(t, "", "--addr", addr, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto",
		strings.Replace(watchShopProto, "string email = 3;", "string email = 3;\n  string city = 4;", 1)))
	mustCLI(t, `{"id": 9, "email": "c@x", "city": "Paris"}`, "--addr", addr, "insert", "--type", "shop.User")
	later := parseChanges(t, waitLines(t, out, 2))
	stop()
	if string(later[1].Record) != `{"id":"9","email":"c@x","city":"Paris"}` {
		t.Errorf("after a schema change: %+v", later[1])
	}

	// A filter, and progress lines: the first names the start.
	out, stop = watching(t, "--addr", addr, "watch", "-t", "shop.User", "--from", "oldest", "-w", `name = "ann"`, "--progress")
	lines = waitLines(t, out, 3)
	stop()
	progress := parseChanges(t, lines)
	if progress[0].Progress == "" || progress[1].Op != "CHANGE_OP_INSERT" || progress[2].Op != "CHANGE_OP_UPDATE" {
		t.Errorf("filtered watch with progress:\n%s", strings.Join(lines, "\n"))
	}
}

func TestWatchCommandErrors(t *testing.T) {
	addr := watchServer(t)
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no type", []string{"watch"}, exitstatus.Usage, []string{`"type" not set`}},
		{"empty type", []string{"watch", "-t", " "}, exitstatus.Usage, []string{"--type: empty record type name"}},
		{"argument", []string{"watch", "-t", "shop.User", "extra"}, exitstatus.Usage, []string{"unknown command", "extra"}},
		{"from a word", []string{"watch", "-t", "shop.User", "--from", "yesterday"}, exitstatus.Usage, []string{`--from "yesterday": want now, oldest, or a position C or C.I`}},
		{"from negative", []string{"watch", "-t", "shop.User", "--from", "-3"}, exitstatus.Usage, []string{`--from "-3"`}},
		{"from a dot too many", []string{"watch", "-t", "shop.User", "--from", "3.1.2"}, exitstatus.Usage, []string{`--from "3.1.2"`, "index"}},
		{"from no index", []string{"watch", "-t", "shop.User", "--from", "3."}, exitstatus.Usage, []string{"index: want a decimal number"}},
		{"from commit overflow", []string{"watch", "-t", "shop.User", "--from", "18446744073709551616"}, exitstatus.Usage, []string{"does not fit 64 bits"}},
		{"from index overflow", []string{"watch", "-t", "shop.User", "--from", "1.4294967296"}, exitstatus.Usage, []string{"does not fit 32 bits"}},
		{"from empty", []string{"watch", "-t", "shop.User", "--from", ""}, exitstatus.Usage, []string{`--from ""`}},
		{"old not a bool", []string{"watch", "-t", "shop.User", "--old=maybe"}, exitstatus.Usage, []string{"--old"}},
		{"where syntax", []string{"watch", "-t", "shop.User", "-w", "id >= and"}, exitstatus.Usage, []string{"--where:", "id >= and", "^"}},
		{"where hostile", []string{"watch", "-t", "shop.User", "-w", "name = \"\xff\""}, exitstatus.Usage, []string{"--where:", "UTF-8"}},
		{"unknown type", []string{"watch", "-t", "shop.Nope"}, exitstatus.Failed, []string{`unknown record type "shop.Nope"`, "shop.Order", "shop.User"}},
		{"unknown field", []string{"watch", "-t", "shop.User", "-w", "age > 3"}, exitstatus.Failed, []string{"watch failed", "age"}},
		{"field of one type only", []string{"watch", "-t", "shop.User", "-t", "shop.Order", "-w", "total > 3"}, exitstatus.Failed, []string{"total"}},
		{"position from the future", []string{"watch", "-t", "shop.User", "--from", "99999999"}, exitstatus.Failed, []string{"OutOfRange"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, "", append([]string{"--addr", addr}, c.args...)...)
			wantCode(t, r, c.code)
			wantContains(t, r.stderr, c.want...)
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
}

// envWatchChild makes the test binary run protobase with the arguments it
// holds (one per line) instead of its tests.
const envWatchChild = "PROTOBASE_TEST_WATCH_CHILD"

// TestWatchInterrupted sends SIGINT to a protobase watch process: it exits
// 0, and every line it printed is whole.
func TestWatchInterrupted(t *testing.T) {
	if args := os.Getenv(envWatchChild); args != "" {
		os.Exit(run(context.Background(), strings.Split(args, "\n"), os.Stdin, os.Stdout, os.Stderr))
	}
	addr := watchServer(t)
	var users strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&users, `{"id": %d, "name": "user-%d", "email": "%d@x"}`+"\n", i, i, i)
	}
	mustCLI(t, users.String(), "--addr", addr, "insert", "--type", "shop.User")
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchInterrupted$")
	cmd.Env = append(os.Environ(), envWatchChild+"="+strings.Join([]string{"--addr", addr, "watch", "-t", "shop.User", "--from", "oldest"}, "\n"))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	br := bufio.NewReader(stdout)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no line from the watch: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("interrupted watch: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(first+string(rest), "\n"), "\n")
	for _, c := range parseChanges(t, lines) {
		if c.Op != "CHANGE_OP_INSERT" || !positionText.MatchString(c.Position) {
			t.Fatalf("line %+v", c)
		}
	}
	t.Logf("%d lines before the interrupt ended the watch", len(lines))
}

// TestWatchCommandExpired: schema get shows a type's ttl; the reaper's
// remove of an expired record prints "expired": true, and a client's
// remove no such field.
func TestWatchCommandExpired(t *testing.T) {
	addr := startServer(t).Addr()
	mustCLI(t, "", "--addr", addr, "schema", "apply", writeFile(t, t.TempDir(), "tt.proto", `syntax = "proto3";
package tt;
import "protobase/v1/options.proto";
import "google/protobuf/timestamp.proto";
message Session {
  option (protobase.v1.record) = { primary_key: "id" ttl: { field: "expires_at" } };
  int64 id = 1;
  google.protobuf.Timestamp expires_at = 2;
}
`))
	// schema get names the ttl field and the expiry index.
	r := mustCLI(t, "", "--addr", addr, "schema", "get")
	wantContains(t, r.stdout, "  tt.Session  primary key (id)\n    ttl expires_at\n    index (ttl) (expires_at.seconds, expires_at.nanos) ready\n")
	exp := time.Now().Add(200 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	mustCLI(t, fmt.Sprintf(`{"id": 1, "expires_at": %q}`+"\n"+`{"id": 2}`, exp), "--addr", addr, "insert", "--type", "tt.Session")
	mustCLI(t, `{"id": 2}`, "--addr", addr, "remove", "--type", "tt.Session")
	out, stop := watching(t, "--addr", addr, "watch", "-t", "tt.Session", "--from", "oldest")
	lines := waitLines(t, out, 4) // two inserts, the client's remove, the reaper's
	stop()
	if !strings.Contains(lines[3], `"op":"CHANGE_OP_REMOVE"`) || !strings.Contains(lines[3], `"key":{"id":"1"}`) || !strings.Contains(lines[3], `"expired":true`) {
		t.Errorf("the reaper's remove: %s", lines[3])
	}
	if strings.Contains(lines[2], "expired") {
		t.Errorf("a client's remove: %s", lines[2])
	}
}
