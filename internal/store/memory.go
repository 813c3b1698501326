package store

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Memory budgets that follow the machine: the block cache and the
// memtables default to a fraction of the memory the process may use,
// within bounds, so that a small container is not overcommitted and a
// large machine is not left idle. Writes stop at MemTableStopWrites
// memtables (one being written, the others waiting to be flushed), so the
// memtables hold at most MemTableStopWrites × MemTableBytes.
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

// Memory returns the memory this process may use: the machine's
// (MemTotal in /proc/meminfo) or its cgroup's limit when lower (cgroup v2
// memory.max, v1 memory.limit_in_bytes). 0 where neither is known (not
// Linux).
func Memory() uint64 {
	total := memTotal(readFile("/proc/meminfo"))
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if lim := cgroupLimit(readFile(f)); lim > 0 && (total == 0 || lim < total) {
			total = lim
		}
	}
	return total
}

func readFile(name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil
	}
	return b
}

// memTotal reads MemTotal (in kB) from /proc/meminfo's text; 0 if absent.
func memTotal(meminfo []byte) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil || kb > 1<<50 {
			return 0
		}
		return kb << 10
	}
	return 0
}

// cgroupLimit parses a cgroup memory limit file: a number of bytes, or
// "max" (none). cgroup v1 writes a huge number for none; anything from
// 1<<60 up counts as none. 0 means no limit.
func cgroupLimit(b []byte) uint64 {
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n >= 1<<60 {
		return 0
	}
	return n
}
