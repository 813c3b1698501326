package pebble

// Memory budgets that follow the machine: the block cache and the
// memtables default to a fraction of the memory the process may use
// (memsize.Usable), within bounds, so that a small container is not
// overcommitted and a large machine is not left idle. Writes stop at
// MemTableStopWrites memtables (one being written, the others waiting to
// be flushed), so the memtables hold at most MemTableStopWrites ×
// MemTableBytes.
const (
	// CacheFraction: the block cache defaults to 1/CacheFraction of memory,
	// between MinCacheBytes and MaxCacheBytes.
	CacheFraction       = 8
	MinCacheBytes int64 = 64 << 20
	MaxCacheBytes int64 = 4 << 30
	// MemTableFraction: one memtable defaults to 1/MemTableFraction of
	// memory, between MinMemTableBytes and MaxMemTableBytes (all
	// MemTableStopWrites of them: at most 1/16 of memory).
	MemTableFraction       = 64
	MinMemTableBytes int64 = 16 << 20
	MaxMemTableBytes int64 = 128 << 20
	// MemTableStopWrites is how many memtables may exist before writes
	// stall until a flush finishes.
	MemTableStopWrites = 4
)

// Sizes used when Options.CacheBytes or MemTableBytes is 0 and the
// memory available is unknown (see DefaultSizes).
const (
	// DefaultCacheBytes is the block cache size then.
	DefaultCacheBytes int64 = 256 << 20
	// DefaultMemTableBytes is the memtable size then.
	DefaultMemTableBytes int64 = 64 << 20
	// LeastMemTableBytes is the smallest Options.MemTableBytes Open
	// takes: Pebble panics on memtables of a few KiB, and the index
	// instance's are half the size. 4 MiB is Pebble's own default.
	LeastMemTableBytes int64 = 4 << 20
)

// DefaultSizes returns the block cache and memtable sizes for a process
// that may use memory bytes (0: unknown, DefaultCacheBytes and
// DefaultMemTableBytes).
func DefaultSizes(memory uint64) (cacheBytes, memTableBytes int64) {
	if memory == 0 {
		return DefaultCacheBytes, DefaultMemTableBytes
	}
	m := int64(min(memory, 1<<62)) //nolint:gosec // bounded just above
	return min(max(m/CacheFraction, MinCacheBytes), MaxCacheBytes),
		min(max(m/MemTableFraction, MinMemTableBytes), MaxMemTableBytes)
}
