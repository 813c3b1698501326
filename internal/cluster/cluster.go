// Package cluster runs a local Protobase cluster as separate processes on
// loopback: etcd members (cmd/protobase-etcd, built from the etcd module) and
// Protobase servers (cmd/protobase serve --store etcd) over them. Each is its
// own process so that a test can kill one with SIGKILL, as a machine failure
// would, and start it again on the same data directory, or replace a lost
// member by a new one (Etcd.Replace). The tests of the etcd backend and
// `make cluster` (cmd/protobase-cluster) use it.
//
// Every wait is bounded: a process that does not come up within its timeout
// is an error carrying the tail of its log, never a hang. Processes die with
// the process that started them (on Linux, by the parent-death signal), so
// a test that panics leaves none behind.
package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StartTimeout bounds how long a process may take to report that it serves.
// A three-member etcd cluster elects its leader in about a second; the
// bound is generous for a loaded machine, and only a failure waits it out.
const StartTimeout = 60 * time.Second

// stopTimeout bounds how long a process may take to exit after SIGTERM
// before it is killed.
const stopTimeout = 15 * time.Second

// Binaries are the programs a cluster runs.
type Binaries struct {
	Etcd      string // cmd/protobase-etcd
	Protobase string // cmd/protobase
}

// Build compiles cmd/protobase-etcd and cmd/protobase of the module that
// holds the working directory into dir, with the go command on PATH (the
// build cache makes a second build a link only).
func Build(ctx context.Context, dir string) (Binaries, error) {
	etcd, err := BuildEtcd(ctx, dir)
	if err != nil {
		return Binaries{}, err
	}
	pb := filepath.Join(dir, "protobase")
	if err := goBuild(ctx, pb, "./cmd/protobase"); err != nil {
		return Binaries{}, err
	}
	return Binaries{Etcd: etcd, Protobase: pb}, nil
}

// BinCache returns the directory, created if missing, where tests keep
// the programs they build: one in the user's cache per checkout (keyed by
// the module root), kept between runs so that an unchanged program is not
// linked again (go build skips a target that is up to date, which saves
// some twenty seconds a run on a small machine).
func BinCache(ctx context.Context) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "protobase-test-bin", fmt.Sprintf("%x", sha256.Sum256([]byte(root)))[:16])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// CachedEtcd builds cmd/protobase-etcd once per process into the tests'
// program cache (BinCache) and returns its path.
var CachedEtcd = sync.OnceValues(func() (string, error) {
	ctx := context.Background()
	dir, err := BinCache(ctx)
	if err != nil {
		return "", err
	}
	return BuildEtcd(ctx, dir)
})

// BuildEtcd compiles cmd/protobase-etcd alone into dir and returns its path.
func BuildEtcd(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "protobase-etcd")
	return bin, goBuild(ctx, bin, "./cmd/protobase-etcd")
}

func goBuild(ctx context.Context, bin, pkg string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// moduleRoot is the directory of the go.mod that holds the working
// directory (a test runs in its package's directory, inside the module).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("the working directory is not inside the protobase module")
	}
	return filepath.Dir(mod), nil
}

// process is one child process and what waits on it.
//
// Invariant: done is closed once the process has exited and been reaped;
// err is set before and read only after done closes.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string // path of the file holding its stderr (and stdout past the ready line)
	done chan struct{}
	err  error
}

// readyFunc recognises the stdout line a process prints once it serves,
// and returns what the line says (the address, for a server).
type readyFunc func(line string) (rest string, ok bool)

// prefixed recognises a line beginning with prefix; rest is the remainder.
func prefixed(prefix string) readyFunc {
	return func(line string) (string, bool) {
		if !strings.HasPrefix(line, prefix) {
			return "", false
		}
		return strings.TrimSpace(strings.TrimPrefix(line, prefix)), true
	}
}

// start runs bin with args, its stderr appended to logPath, and waits up to
// StartTimeout for a stdout line that ready recognises; it returns what
// ready made of it.
func start(ctx context.Context, name, bin string, args []string, logPath string, ready readyFunc) (*process, string, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("%s: log: %w", name, err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	lines := make(chan string, 1)
	go p.readStdout(out, logPath, ready, lines)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case rest, ok := <-lines:
		if ok {
			return p, rest, nil
		}
		<-p.done
		return nil, "", fmt.Errorf("%s exited before it served (%w)%s", name, p.err, p.logTail())
	case <-timer.C:
		p.kill()
		return nil, "", fmt.Errorf("%s did not serve within %s%s", name, StartTimeout, p.logTail())
	case <-ctx.Done():
		p.kill()
		return nil, "", fmt.Errorf("%s: %w", name, ctx.Err())
	}
}

// readStdout hands the ready line's remainder to lines (or closes it if the
// output ends first) and copies every other line to the log, so that the
// child never blocks on a full pipe.
func (p *process) readStdout(out io.Reader, logPath string, isReady readyFunc, lines chan<- string) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		logf = nil
	}
	defer func() {
		if logf != nil {
			logf.Close()
		}
	}()
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		line := sc.Text()
		if !ready {
			if rest, ok := isReady(line); ok {
				ready = true
				lines <- rest
				continue
			}
		}
		if logf != nil {
			fmt.Fprintln(logf, line)
		}
	}
	if !ready {
		close(lines)
	}
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM, waits up to stopTimeout, then kills.
func (p *process) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: signal: %w", p.name, err)
	}
	_ = p.resume() // a paused process handles SIGTERM only once it runs
	select {
	case <-p.done:
		var ee *exec.ExitError
		if p.err != nil && (!errors.As(p.err, &ee) || !ee.Exited() || ee.ExitCode() != 0) {
			return fmt.Errorf("%s: %w%s", p.name, p.err, p.logTail())
		}
		return nil
	case <-time.After(stopTimeout):
		p.kill()
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", p.name, stopTimeout)
	}
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitStatus reports whether the process has ended and, if so, how: nil
// for exit status 0, else what cmd.Wait returned.
func (p *process) exitStatus() (bool, error) {
	if !p.exited() {
		return false, nil
	}
	return true, p.err
}

// logTail is the end of the process's log, to explain a failure.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil || len(b) == 0 {
		return ""
	}
	const max = 4 << 10
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "\n--- " + p.log + " (end) ---\n" + string(b)
}

// stopAll stops ps concurrently and joins their errors.
func stopAll(ps []*process) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, p := range ps {
		if p == nil || p.exited() {
			continue
		}
		wg.Go(func() {
			if err := p.stop(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
