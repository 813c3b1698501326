package recordcache

// DefaultBytes is the default budget for a process that may use memory
// bytes (the machine's or its cgroup's limit, memsize.Usable): 1/32 of it,
// at least 64 MiB and at most 1 GiB (256 MiB when memory is 0, unknown).
// A 100-byte record with a 10-byte key costs about 160 bytes (its
// allocation of 112, rounded to 112, and 32 to 64 bytes of table), so
// 1 GiB holds about 6.5 million.
func DefaultBytes(memory uint64) int64 {
	if memory == 0 {
		return 256 << 20
	}
	return min(max(int64(memory/32), 64<<20), 1<<30)
}
