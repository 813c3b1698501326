package docs

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stopWithin bounds how long a command documented as running until
// Ctrl-C may take to print its documented output; once printed (or past
// the bound), the test stops it with SIGTERM, which it takes as Ctrl-C.
const stopWithin = 60 * time.Second

// shellBlock runs the commands of a shell block in the long-lived shell.
// The server's own command is skipped: the test runs it.
func (d *docsRun) shellBlock(t *testing.T, page string, b block) {
	t.Helper()
	for _, s := range shellStatements(b.text) {
		if strings.HasPrefix(s.text, "protobase serve ") || strings.HasPrefix(s.text, "make ") {
			continue
		}
		at := fmt.Sprintf("%s:%d", page, b.line+s.line-1)
		text := d.localize(s.text)
		var out, errOut string
		var code int
		if s.runsUntilStopped() {
			out, errOut, code = d.shellUntilStopped(t, at, text, s.output)
		} else {
			out, errOut, code = d.shell(t, at, text)
		}
		switch want := s.wantExit(); {
		case want == -1 && code == 0:
			t.Fatalf("%s: %s\nsucceeded; the page says it fails\nstdout:\n%s", at, s.text, out)
		case want >= 0 && code != want:
			t.Fatalf("%s: %s\nexit %d, want %d\nstdout:\n%s\nstderr:\n%s", at, s.text, code, want, out, errOut)
		}
		if len(s.output) > 0 && !matches(out+errOut, s.output) {
			t.Errorf("%s: %s\nprinted:\n%s%s\nthe page says:\n%s", at, s.text, out, errOut, strings.Join(s.output, "\n"))
		}
	}
}

// shell runs one command and returns what it printed and its status.
func (d *docsRun) shell(t *testing.T, at, text string) (stdout, stderr string, code int) {
	t.Helper()
	dir := filepath.Dir(d.work)
	outFile, errFile := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	req := fmt.Sprintf("{ %s\n} >%s 2>%s </dev/null; echo \"__status $?\"\n", text, outFile, errFile)
	l, err := d.sh.ask(req, func(l string) bool { return strings.HasPrefix(l, "__status ") })
	if err != nil {
		t.Fatalf("%s: %s\n%v", at, text, err)
	}
	code, _ = strconv.Atoi(strings.TrimPrefix(l, "__status "))
	o, _ := os.ReadFile(outFile)
	e, _ := os.ReadFile(errFile)
	return string(o), string(e), code
}

// shellUntilStopped runs a command that runs until Ctrl-C in the
// background, waits until it printed want, stops it and returns what it
// printed and its status.
func (d *docsRun) shellUntilStopped(t *testing.T, at, text string, want []string) (stdout, stderr string, status int) {
	t.Helper()
	dir := filepath.Dir(d.work)
	outFile, errFile := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	for _, f := range []string{outFile, errFile} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	// The command alone (comments cut), so that $! is its process.
	var sc shellScan
	var code []string
	for _, l := range strings.Split(text, "\n") {
		c, _ := sc.line(l)
		code = append(code, c)
	}
	req := fmt.Sprintf("%s >%s 2>%s </dev/null &\necho \"__pid $!\"\n", strings.Join(code, "\n"), outFile, errFile)
	l, err := d.sh.ask(req, func(l string) bool { return strings.HasPrefix(l, "__pid ") })
	if err != nil {
		t.Fatalf("%s: %s\n%v", at, text, err)
	}
	pid, _ := strconv.Atoi(strings.TrimPrefix(l, "__pid "))
	for deadline := time.Now().Add(stopWithin); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if o, _ := os.ReadFile(outFile); len(want) > 0 && matches(string(o), want) {
			break
		}
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("%s: stop %d: %v", at, pid, err)
	}
	l, err = d.sh.ask(fmt.Sprintf("wait %d; echo \"__status $?\"\n", pid), func(l string) bool { return strings.HasPrefix(l, "__status ") })
	if err != nil {
		t.Fatalf("%s: %s\n%v", at, text, err)
	}
	status, _ = strconv.Atoi(strings.TrimPrefix(l, "__status "))
	o, _ := os.ReadFile(outFile)
	e, _ := os.ReadFile(errFile)
	return string(o), string(e), status
}

// pythonBlock runs a Python snippet in the long-lived interpreter; the
// comment lines after a statement are its documented output.
func (d *docsRun) pythonBlock(t *testing.T, page string, b block) {
	t.Helper()
	req, _ := json.Marshal(map[string]string{"code": d.localize(b.text)})
	l, err := d.py.ask(string(req)+"\n", func(string) bool { return true })
	if err != nil {
		t.Fatalf("%s:%d: %v", page, b.line, err)
	}
	var results []struct {
		Start, End int
		Output     string
		Error      *string
	}
	if err := json.Unmarshal([]byte(l), &results); err != nil {
		t.Fatalf("%s:%d: the snippet runner answered %q: %v", page, b.line, l, err)
	}
	lines := strings.Split(b.text, "\n")
	for _, r := range results {
		at := fmt.Sprintf("%s:%d", page, b.line+r.Start-1)
		if r.Error != nil {
			t.Fatalf("%s: %s\n%s", at, strings.Join(lines[r.Start-1:r.End], "\n"), *r.Error)
		}
		if want := commentsAfter(lines, r.End, "#"); len(want) > 0 && !matches(r.Output, want) {
			t.Errorf("%s: %s\nprinted:\n%s\nthe page says:\n%s", at, strings.Join(lines[r.Start-1:r.End], "\n"), r.Output, strings.Join(want, "\n"))
		}
	}
}

// commentsAfter returns the lines holding only a comment right after line
// end (1-based), up to a line of code or a blank one.
func commentsAfter(lines []string, end int, mark string) []string {
	var out []string
	for _, l := range lines[end:] {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, mark) {
			break
		}
		out = append(out, strings.TrimSpace(strings.TrimPrefix(l, mark)))
	}
	return out
}

// goProgram builds Go snippets as the body of a program's main, with the
// packages they name imported, and runs it in the working directory. The
// comment lines after a line that prints are its documented output, in
// order.
func (d *docsRun) goProgram(t *testing.T, page string, snippets []block) {
	t.Helper()
	at := fmt.Sprintf("%s:%d", page, snippets[0].line)
	dir, err := os.MkdirTemp(d.root, "_docsrun")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var texts []string
	for _, b := range snippets {
		texts = append(texts, b.text)
	}
	text := strings.Join(texts, "\n")
	body := d.localize(text)
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for name, path := range goImports {
		if regexp.MustCompile(`\b` + name + `\.`).MatchString(body) {
			fmt.Fprintf(&src, "\t%s %q\n", name, path)
		}
	}
	fmt.Fprintf(&src, ")\n\nfunc main() {\n%s\n}\n", body)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(d.bin, "goexample")
	build := exec.Command("go", "build", "-o", prog, "./"+filepath.Base(dir))
	build.Dir = d.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: the Go snippets do not build: %v\n%s\n%s", at, err, out, src.String())
	}
	out := d.command(t, prog)
	lines := strings.Split(text, "\n")
	var want []string
	for i, l := range lines {
		if strings.Contains(l, "fmt.Print") {
			if w := commentsAfter(lines, i+1, "//"); len(w) > 0 {
				want = append(want, strings.Join(w, ""), "...")
			}
		}
	}
	if len(want) > 0 && !matches(out, want) {
		t.Errorf("%s: the Go snippets printed:\n%s\nthe page says:\n%s", at, out, strings.Join(want, "\n"))
	}
}

// goImports are the packages a Go snippet may name.
var goImports = map[string]string{
	"context": "context",
	"errors":  "errors",
	"fmt":     "fmt",
	"log":     "log",
	"os":      "os",
	"client":  "github.com/protobase/protobase/client",
	"pb":      "github.com/protobase/protobase/gen/protobase/v1",
}
