package release

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// instruction is one instruction of a Containerfile: its keyword in upper
// case and the rest of its line, continuation lines joined.
type instruction struct {
	cmd, args string
}

// stage is one FROM and the instructions after it.
type stage struct {
	from string
	ins  []instruction
}

// parseContainerfile splits the Containerfile into its stages. It reads
// what this repository's file uses: comments, blank lines and lines
// continued with a backslash.
func parseContainerfile(t *testing.T) []stage {
	t.Helper()
	f, err := os.Open(filepath.Join(root(t), "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var line string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line += cont + " "
			continue
		}
		line += text
		cmd, args, _ := strings.Cut(line, " ")
		line = ""
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, stage{from: in.args})
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("Containerfile: %s before the first FROM", in.cmd)
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(stages) == 0 {
		t.Fatal("Containerfile: no FROM")
	}
	return stages
}

// all returns the arguments of every instruction cmd of s.
func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// one returns the arguments of s's only instruction cmd.
func (s stage) one(t *testing.T, cmd string) string {
	t.Helper()
	a := s.all(cmd)
	if len(a) != 1 {
		t.Fatalf("the image's stage has %d %s instructions, want 1", len(a), cmd)
	}
	return a[0]
}

// execForm decodes an instruction in exec form (a JSON array of strings):
// the form that needs no shell in the image.
func execForm(t *testing.T, cmd, args string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("%s %s is not in exec form (a JSON array): FROM scratch has no shell", cmd, args)
	}
	return argv
}

// env returns the ENV variables of s (KEY=VALUE form).
func (s stage) env(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, a := range s.all("ENV") {
		for _, kv := range strings.Fields(a) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("ENV %s: want KEY=VALUE", a)
			}
			env[k] = v
		}
	}
	return env
}

var (
	copyFrom   = regexp.MustCompile(`^--from=build (?:--chown=(\d+):(\d+) )?(.+) (\S+)$`)
	passwdUser = regexp.MustCompile(`'(\w+):x:(\d+):(\d+):[^']*' > /rootfs/etc/passwd`)
)

// The image is FROM scratch, holds the release build's binary, runs as a
// user other than root that /etc/passwd names, keeps its data on a volume
// the user owns, exposes the server's ports, and checks its health and
// serves without a shell, with authentication left on.
func TestContainerfile(t *testing.T) {
	stages := parseContainerfile(t)
	img := stages[len(stages)-1]
	if img.from != "scratch" {
		t.Errorf("the image is FROM %q, want scratch", img.from)
	}
	build := stages[0]
	run := strings.Join(build.all("RUN"), "\n")
	if !strings.Contains(run, "COMMANDS=protobase scripts/release ") {
		t.Errorf("the build stage does not build the binary with scripts/release (as make release does):\n%s", run)
	}

	// What the image copies from the build stage, by destination.
	copied := map[string]string{}
	owner := map[string]string{}
	for _, c := range img.all("COPY") {
		m := copyFrom.FindStringSubmatch(c)
		if m == nil {
			t.Fatalf("COPY %s: want --from=build [--chown=U:G] SRC... DEST", c)
		}
		copied[m[4]] = m[3]
		if m[1] != "" {
			owner[m[4]] = m[1]
		}
	}
	bin := "/usr/local/bin/protobase"
	if copied[bin] != "/rootfs/protobase" || !strings.Contains(run, `cp "/out/protobase-$VERSION-$os-$arch" /rootfs/protobase`) {
		t.Errorf("the image's %s is not the binary scripts/release built (COPY %v)", bin, copied)
	}
	if copied["/etc/"] != "/rootfs/etc/passwd /rootfs/etc/group" {
		t.Errorf("the image does not copy /etc/passwd and /etc/group (COPY %v)", copied)
	}

	user := img.one(t, "USER")
	uid, gid, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %s: want a numeric user other than root (0)", user)
	}
	m := passwdUser.FindStringSubmatch(run)
	if m == nil || m[2] != uid || m[3] != gid {
		t.Errorf("USER %s has no /etc/passwd entry made in the build stage (%q)", user, m)
	}

	checkDataAndListeners(t, img, copied, owner, uid)

	if argv := healthcheck(t, img); argv[0] != bin || len(argv) < 2 || argv[1] != "health" {
		t.Errorf("HEALTHCHECK CMD %v, want %s health", argv, bin)
	}
	if argv := execForm(t, "ENTRYPOINT", img.one(t, "ENTRYPOINT")); len(argv) != 2 || argv[0] != bin || argv[1] != "serve" {
		t.Errorf("ENTRYPOINT %v, want [%s serve]", argv, bin)
	}
}

// checkDataAndListeners checks the data directory is a volume the image's
// user owns, the listeners are on every interface on ports the image
// exposes, and authentication, which such listeners turn on, is not
// turned off.
func checkDataAndListeners(t *testing.T, img stage, copied, owner map[string]string, uid string) {
	t.Helper()
	env := img.env(t)
	data := env["PROTOBASE_DATA"]
	if vol := execForm(t, "VOLUME", img.one(t, "VOLUME")); len(vol) != 1 || vol[0] != data || data == "" {
		t.Errorf("VOLUME %v, want the data directory PROTOBASE_DATA=%q alone", vol, data)
	}
	if copied[data] == "" || owner[data] != uid {
		t.Errorf("the data directory %s is not made owned by the user %s (COPY %v, owners %v)", data, uid, copied, owner)
	}

	exposed := strings.Fields(img.one(t, "EXPOSE"))
	for _, v := range []string{"PROTOBASE_GRPC_ADDR", "PROTOBASE_METRICS_ADDR"} {
		host, port, err := net.SplitHostPort(env[v])
		if err != nil || host != "0.0.0.0" || !contains(exposed, port) {
			t.Errorf("%s=%q: want 0.0.0.0:PORT with PORT in EXPOSE %v", v, env[v], exposed)
		}
	}

	// Authentication stays on: nothing in the file turns it off.
	for k := range env {
		if strings.Contains(k, "INSECURE") {
			t.Errorf("ENV sets %s", k)
		}
	}
	raw, err := os.ReadFile(filepath.Join(root(t), "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "insecure-no-auth") {
		t.Error("the Containerfile names --insecure-no-auth")
	}
}

// healthcheck returns the command of the image's HEALTHCHECK, which must
// be in exec form.
func healthcheck(t *testing.T, img stage) []string {
	t.Helper()
	hc, ok := strings.CutPrefix(img.one(t, "HEALTHCHECK"), "--")
	_, cmd, found := strings.Cut(hc, " CMD ")
	if !ok || !found {
		t.Fatalf("HEALTHCHECK %s: want options then CMD", hc)
	}
	return execForm(t, "HEALTHCHECK CMD", cmd)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// syncBuffer is an output buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// imageEnviron is the image's ENV as a process environment, with the data
// directory data and each listener's port 0 (a free one), its host kept.
func imageEnviron(t *testing.T, env map[string]string, data string) []string {
	t.Helper()
	var environ []string
	for k, v := range env {
		switch k {
		case "PROTOBASE_DATA":
			v = data
		case "PROTOBASE_GRPC_ADDR", "PROTOBASE_METRICS_ADDR":
			host, _, err := net.SplitHostPort(v)
			if err != nil {
				t.Fatal(err)
			}
			v = net.JoinHostPort(host, "0")
		}
		environ = append(environ, k+"="+v)
	}
	return environ
}

var servingOn = regexp.MustCompile(`protobase serving on (\S+) `)

// The release binary run as the image runs it — its ENTRYPOINT, with its
// ENV and nothing else in the environment, the data directory and the
// ports aside (a temporary directory, free ports) — serves with
// authentication on, answers the image's HEALTHCHECK command, and stops
// cleanly on SIGTERM, as a container runtime stops it. It stands in for
// starting the image, so that the tests need no container runtime.
func TestImageEntrypoint(t *testing.T) {
	bin := filepath.Join(releaseBuild(t), binaryName("protobase", runtime.GOOS, runtime.GOARCH))
	stages := parseContainerfile(t)
	img := stages[len(stages)-1]
	env := img.env(t)
	wantServeVariables(t, bin, env)
	data := t.TempDir()
	environ := imageEnviron(t, env, data)

	entry := execForm(t, "ENTRYPOINT", img.one(t, "ENTRYPOINT"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv := exec.CommandContext(ctx, bin, entry[1:]...)
	srv.Env = environ
	var stdout, stderr syncBuffer
	srv.Stdout, srv.Stderr = &stdout, &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	defer func() {
		_ = srv.Process.Kill()
	}()
	var addr string
	for addr == "" {
		if m := servingOn.FindStringSubmatch(stdout.String()); m != nil {
			addr = m[1]
			continue
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	local := net.JoinHostPort("127.0.0.1", port)

	// Authentication is on: the first start made the admin key.
	if fi, err := os.Stat(filepath.Join(data, "admin.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("admin.key: %v, %v; want a file of mode 0600 (auth on)", fi, err)
	}
	out, err := exec.Command(bin, "--addr", local, "schema", "get").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Unauthenticated") {
		t.Errorf("schema get without a key: %v\n%s\nwant Unauthenticated", err, out)
	}

	// The HEALTHCHECK command, with the port this server took (the image's
	// is --addr's default, 127.0.0.1:7070).
	argv := healthcheck(t, img)
	check := exec.Command(bin, append(argv[1:], "--addr", local)...)
	check.Env = environ
	if out, err := check.CombinedOutput(); err != nil || string(out) != "SERVING\n" {
		t.Errorf("%v: %v\n%s", argv, err, out)
	}

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("serve after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
	}
}
