//go:build !linux

package recordcache

// machineMemory returns 0 (unknown) where the platform is not read.
func machineMemory() int64 { return 0 }
