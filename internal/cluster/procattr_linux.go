package cluster

import "syscall"

// sysProcAttr makes the kernel kill the child when the process that started
// it dies, so that a crashed or timed-out test leaves no member running.
// (The signal follows the starting thread; Go keeps threads alive unless a
// goroutine locked to one exits, which nothing here does.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
