//go:build unix

package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pause stops the process (SIGSTOP) and, where /proc shows its threads,
// returns once every one of them is stopped: a thread running on another
// core when the signal is sent may otherwise answer one more request.
func (p *process) pause() error {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	tasks := filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "task")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if stopped, known := allStopped(tasks); stopped || !known {
			return nil // without /proc, the signal is all there is
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not stopped 10s after SIGSTOP", p.name)
		}
	}
}

// resume lets a paused process go on (SIGCONT).
func (p *process) resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// allStopped reports whether every thread under tasks (/proc/PID/task) is
// in state T (stopped); known is false when /proc cannot tell.
func allStopped(tasks string) (stopped, known bool) {
	ents, err := os.ReadDir(tasks)
	if err != nil {
		return false, false
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(tasks, e.Name(), "stat"))
		if err != nil {
			return false, false
		}
		// The state follows the command name, which is in parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false, true
		}
	}
	return true, true
}
