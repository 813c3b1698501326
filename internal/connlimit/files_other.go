//go:build !unix

package connlimit

// FileLimit returns 0 (unknown) where there is no RLIMIT_NOFILE.
func FileLimit() uint64 { return 0 }
