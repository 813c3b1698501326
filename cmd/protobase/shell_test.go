package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/protobase/protobase/internal/exitstatus"
)

// TestShellScript runs a script of statements from stdin: each through
// the CLI's command, records as JSON lines until \format table, errors
// reported with the rest of the script run, and exit 1 at the end.
func TestShellScript(t *testing.T) {
	addr := watchServer(t)
	script := strings.Join([]string{
		"# users",
		`insert shop.User {"id": 1, "name": "Ann", "email": "ann@x"}`,
		`insert shop.User {"id": 2, "name": "Bob", "email": "bob@x"}`,
		`count shop.User`,
		`search shop.User name = "Ann"`,
		`get shop.User 2 1`,
		`update shop.User {"id": 2, "name": "Robert", "email": "bob@x"}`,
		`\format table`,
		`query shop.User id >= 2`,
		`explain shop.User email = "bob@x"`,
		`remove shop.User {"id": 1}`,
		`search -t shop.User -w 'id >= 1' --format jsonl`,
		`search shop.User nme = "x"`,
		`bogus`,
		`\format xml`,
		`count shop.User`,
	}, "\n")
	r := cli(t, script, "--addr", addr, "shell")
	if r.code != exitstatus.Failed {
		t.Errorf("exit %d, want %d (statements failed)\nstderr:\n%s", r.code, exitstatus.Failed, r.stderr)
	}
	want := `2
{"id":"1","name":"Ann","email":"ann@x"}
{"id":"2","name":"Bob","email":"bob@x"}
{"id":"1","name":"Ann","email":"ann@x"}
id  name    email
2   Robert  bob@x
1
{"id":"2","name":"Robert","email":"bob@x"}
1
`
	if r.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
	for _, w := range []string{
		"inserted 1 record", "updated 1 record", "removed 1 record",
		"plan: index_range email",
		`nme`,
		`error: unknown statement "bogus"`,
		`error: \format "xml": want table or json`,
	} {
		wantContains(t, r.stderr, w)
	}
}

// TestShellHelpLeaves checks help and exit: nothing after exit runs.
func TestShellHelpLeaves(t *testing.T) {
	addr := watchServer(t)
	r := mustCLI(t, "help\nexit\ncount shop.User\n", "--addr", addr, "shell")
	wantContains(t, r.stdout, `\format table|json`)
	if strings.Contains(r.stdout, "\n0\n") {
		t.Errorf("a statement ran after exit:\n%s", r.stdout)
	}
}

// terminal is the shell running in a child process on a pseudo-terminal.
type terminal struct {
	t   *testing.T
	pty *os.File
	out *syncBuffer
	cmd *exec.Cmd
}

// startTerminal runs protobase args on a new pseudo-terminal.
func startTerminal(t *testing.T, args ...string) *terminal {
	t.Helper()
	js, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCLIArgs+"="+string(js), "TERM=xterm")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, pty: f, out: &syncBuffer{}, cmd: cmd}
	go func() { _, _ = io.Copy(term.out, f) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
	})
	return term
}

// waitFor waits until the terminal has shown want n times in all.
func (term *terminal) waitFor(want string, n int) {
	term.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(term.out.String(), want) < n {
		if time.Now().After(deadline) {
			term.t.Fatalf("waited 30 s for %q (%d times); the terminal shows:\n%q", want, n, term.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// send types keys.
func (term *terminal) send(keys string) {
	term.t.Helper()
	if _, err := term.pty.WriteString(keys); err != nil {
		term.t.Fatal(err)
	}
}

// TestShellTerminal drives the shell through a pseudo-terminal as a user
// would: Tab completes a type name and a field, the up arrow recalls the
// last statement, and Ctrl-C ends a watch, not the shell.
func TestShellTerminal(t *testing.T) {
	addr := watchServer(t)
	mustCLI(t, `{"id": 1, "name": "Ann", "email": "ann@x"}`, "--addr", addr, "insert", "--type", "shop.User")
	term := startTerminal(t, "--addr", addr, "shell")
	term.waitFor(shellPrompt, 1)

	// A type (shop.User is the only type starting so) and a field.
	term.send("search shop.U\t")
	term.waitFor("search shop.User ", 1)
	term.send("em\t")
	term.waitFor("search shop.User email", 1)
	term.send(" = \"ann@x\"\r")
	term.waitFor("Ann   ann@x\r\n", 1) // the table's row
	term.waitFor(shellPrompt, 2)

	// The up arrow brings the statement back; Enter runs it again.
	term.send("\x1b[A")
	term.waitFor(`protobase> search shop.User email = "ann@x"`, 1) // typed, it was never shown whole
	term.send("\r")
	term.waitFor("Ann   ann@x\r\n", 2)
	term.waitFor(shellPrompt, 3)

	// A watch prints changes until Ctrl-C, then the prompt is back and
	// the shell still works.
	term.send("watch -t shop.User --from oldest\r")
	term.waitFor(`"key":{"id":"1"}`, 1) // the watch runs
	mustCLI(t, `{"id": 2, "name": "Bob", "email": "bob@x"}`, "--addr", addr, "insert", "--type", "shop.User")
	term.waitFor(`"key":{"id":"2"}`, 1)
	term.send("\x03")
	term.waitFor(shellPrompt, 4)
	term.send("count shop.User\r")
	term.waitFor("\r\n2\r\n", 1)
	term.waitFor(shellPrompt, 5)
	term.send("\x04") // Ctrl-D leaves
	done := make(chan error, 1)
	go func() { done <- term.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("shell exit: %v\n%q", err, term.out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the shell did not leave at Ctrl-D:\n%q", term.out.String())
	}
}

// TestShellScriptInterrupt: in a script, SIGINT (Ctrl-C) ends the watch
// that runs, and the script goes on.
func TestShellScriptInterrupt(t *testing.T) {
	addr := watchServer(t)
	mustCLI(t, `{"id": 1, "name": "Ann", "email": "ann@x"}`, "--addr", addr, "insert", "--type", "shop.User")
	js, err := json.Marshal([]string{"--addr", addr, "shell"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCLIArgs+"="+string(js))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if _, err := io.WriteString(in, "watch -t shop.User --from oldest\n"); err != nil {
		t.Fatal(err)
	}
	waitLines(t, &out, 1)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(in, "count shop.User\n"); err != nil {
		t.Fatal(err)
	}
	in.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shell: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the shell did not end:\n%s", out.String())
	}
	if lines := strings.Split(out.String(), "\n"); len(lines) != 3 || lines[1] != "1" {
		t.Errorf("printed:\n%s\nwant the change, then 1", out.String())
	}
}
