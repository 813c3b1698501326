package recordcache

// DefaultBytes is the default budget for a process that may use memory
// bytes (the machine's or its cgroup's limit, memsize.Usable): 1/5 of it,
// at least 64 MiB and at most 8 GiB (256 MiB when memory is 0, unknown).
// A lookup this cache answers costs a tenth of one that Pebble answers
// from its block cache (a table slot and an entry, against an index block
// and a data block searched on every level that may hold the key), so the
// records that are read belong here, not only in the blocks; the block
// cache keeps its own 1/8 for ranges, scans and index entries. A 100-byte
// record with a 10-byte key costs 160 to 220 bytes (its allocation,
// rounded to the allocator's size class, and 32 to 64 bytes of table), so
// the budget of a 24 GiB machine, 4.8 GiB, holds about 20 million.
func DefaultBytes(memory uint64) int64 {
	if memory == 0 {
		return 256 << 20
	}
	return min(max(int64(memory/5), 64<<20), 8<<30)
}
