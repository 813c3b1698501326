package recordcache

// DefaultBytes is the default budget: 1/32 of the machine's memory, at
// least 64 MiB and at most 1 GiB (256 MiB when the memory is unknown). A
// 100-byte record costs about 180 bytes, so 1 GiB holds about 6 million.
func DefaultBytes() int64 {
	m := machineMemory()
	if m <= 0 {
		return 256 << 20
	}
	return min(max(m/32, 64<<20), 1<<30)
}
