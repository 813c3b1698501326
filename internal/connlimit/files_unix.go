//go:build unix

package connlimit

import "syscall"

// FileLimit returns the process's soft limit on open file descriptors
// (0: unknown). The Go runtime raises it to the hard limit at start (Go
// 1.19 and later, on Unix), so this is the hard limit unless the process
// lowered it since.
func FileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur) //nolint:unconvert // int64 on some Unixes
}
