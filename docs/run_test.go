package docs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/freeport"
)

// TestDocsRunInOrder follows the docs as a new user would, on one fresh
// server: the README's quick start, then every shell, Python and Go
// snippet of docs/clients.md in order (the Go snippets between two others
// as one program, as a reader would put them together), then the Python
// examples, then an
// additive schema change. Each command must exit as its comment says
// ("fails", "(exit N)", 0 otherwise) and print the output documented on
// the comment lines right after it, so that a page whose commands stop
// working or whose output changes fails here.
func TestDocsRunInOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server and grpcurl and runs the docs against them")
	}
	python := pythonForDocs(t)
	d := newDocsRun(t, python)

	readme := read(t, "README.md")
	quick := section(readme, "Quick start")
	if quick == "" {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	at := strings.Index(readme, quick)                 // quick is a part of readme: at >= 0
	offset := strings.Count(readme[:max(at, 0)], "\n") // lines before the section, for line numbers
	for _, b := range blocks(quick) {
		if b.lang == "sh" {
			b.line += offset
			d.shellBlock(t, "README.md", b)
		}
	}
	schema := heredoc(t, quick, "shop.proto")
	var program []block // the Go snippets, run as one program at the end of their run of blocks
	for _, b := range blocks(read(t, "docs/clients.md")) {
		if b.lang != "go" && len(program) > 0 {
			d.goProgram(t, "docs/clients.md", program)
			program = nil
		}
		switch b.lang {
		case "sh":
			d.shellBlock(t, "docs/clients.md", b)
		case "proto":
			if strings.TrimSpace(b.text) != strings.TrimSpace(schema) {
				t.Errorf("docs/clients.md:%d: the schema differs from the README's shop.proto", b.line)
			}
		case "python":
			d.pythonBlock(t, "docs/clients.md", b)
		case "go":
			program = append(program, b)
		}
	}
	if len(program) > 0 {
		d.goProgram(t, "docs/clients.md", program)
	}
	for _, ex := range []string{"quickstart.py", "concurrency.py"} {
		d.command(t, python, filepath.Join(d.root, "python", "examples", ex), d.grpc)
	}
	if err := os.WriteFile(filepath.Join(d.work, "stock.proto"), []byte(stockProto), 0o600); err != nil {
		t.Fatal(err)
	}
	d.command(t, "protobase", "schema", "apply", "--add", "stock.proto")
	if got := d.command(t, "protobase", "schema", "get"); !uniqueEmail.MatchString(got) {
		t.Errorf("after the docs and examples, schema get lacks the README's unique email index:\n%s", got)
	}
}

// uniqueEmail is how schema get prints shop.User's unique index on email.
var uniqueEmail = regexp.MustCompile(`(?m)^\s+shop\.User  primary key \(id\)\n\s+index email \(email\) unique ready$`)

const stockProto = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";

message Stock {
  option (protobase.v1.record) = { primary_key: "sku" };
  string sku = 1;
  int64 count = 2;
}
`

// heredoc returns the text a page's shell writes to file with a
// here-document.
func heredoc(t *testing.T, text, file string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)cat > ` + regexp.QuoteMeta(file) + ` <<'(\w+)'\n(.*?)\n(\w+)\n`).FindStringSubmatch(text)
	if m == nil || m[1] != m[3] {
		t.Fatalf("no here-document writes %s", file)
	}
	return m[2]
}

// pythonForDocs returns the Python that runs the snippets: the package's
// virtual environment, which `make test` makes before it runs the Go tests
// and names in PROTOBASE_PYTHON.
func pythonForDocs(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROTOBASE_PYTHON"); p != "" {
		return p
	}
	p, _ := filepath.Abs(filepath.Join("..", "python", ".venv", "bin", "python"))
	if _, err := os.Stat(p); err != nil {
		t.Skip("no python/.venv: `make python-venv` makes it (`make test` does, and runs this test)")
	}
	return p
}

// docsRun is one fresh server and the shell, Python and Go that talk to
// it, all in one working directory.
type docsRun struct {
	root, work, bin string
	grpc, http      string
	env             []string
	sh              *interpreter
	py              *interpreter
}

func newDocsRun(t *testing.T, python string) *docsRun {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	d := &docsRun{root: root, work: filepath.Join(tmp, "work"), bin: filepath.Join(tmp, "bin"), grpc: freeAddr(t), http: freeAddr(t)}
	for _, dir := range []string{d.work, d.bin} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, pkg := range map[string]string{"protobase": "./cmd/protobase", "grpcurl": "github.com/fullstorydev/grpcurl/cmd/grpcurl"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(d.bin, name), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	d.env = append(os.Environ(), "PATH="+d.bin+string(os.PathListSeparator)+os.Getenv("PATH"), "PROTOBASE_ADDR="+d.grpc)
	d.startServer(t, filepath.Join(tmp, "data"))
	d.sh = d.start(t, "bash", "--norc", "--noprofile")
	d.py = d.start(t, python, "-u", filepath.Join(root, "docs", "testdata", "snippets.py"))
	return d
}

// freeAddr is a loopback address on a port free a moment ago, outside the
// kernel's ephemeral range so that no outgoing connection takes it before
// the server listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startServer runs the server as the README's `make serve` does, on the
// test's own ports, and waits until both listeners accept.
func (d *docsRun) startServer(t *testing.T, data string) {
	t.Helper()
	log, err := os.Create(filepath.Join(filepath.Dir(data), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(d.bin, "protobase"), "serve", "--data", data, "--grpc-addr", d.grpc, "--http-addr", d.http)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("server log:\n%s", b)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for _, addr := range []string{d.grpc, d.http} {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server does not listen on %s: %v", addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// localize points a snippet at the test's server and binary: the
// documented addresses become the test's, `go run ./cmd/protobase` the
// built binary on PATH.
func (d *docsRun) localize(s string) string {
	return strings.NewReplacer("go run ./cmd/protobase ", "protobase ", "127.0.0.1:7070", d.grpc, "127.0.0.1:8080", d.http).Replace(s)
}

// command runs a program in the working directory and returns its
// standard output; it must succeed.
func (d *docsRun) command(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := name
	if !filepath.IsAbs(name) {
		path = filepath.Join(d.bin, name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir, cmd.Env = d.work, d.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// interpreter is a long-lived shell or Python, so that what one snippet
// defines the next can use.
type interpreter struct {
	in    io.Writer
	lines chan string
}

func (d *docsRun) start(t *testing.T, name string, args ...string) *interpreter {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env, cmd.Stderr = d.work, d.env, os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ip := &interpreter{in: in, lines: make(chan string)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			ip.lines <- sc.Text()
		}
		close(ip.lines)
	}()
	return ip
}

// snippetTimeout bounds one snippet; a snippet that hangs fails.
const snippetTimeout = 2 * time.Minute

// ask sends a request and returns the first line of the reply that
// satisfies done.
func (ip *interpreter) ask(req string, done func(string) bool) (string, error) {
	if _, err := io.WriteString(ip.in, req); err != nil {
		return "", err
	}
	timeout := time.After(snippetTimeout)
	for {
		select {
		case l, ok := <-ip.lines:
			if !ok {
				return "", io.ErrUnexpectedEOF
			}
			if done(l) {
				return l, nil
			}
		case <-timeout:
			return "", fmt.Errorf("no answer within %v", snippetTimeout)
		}
	}
}
