// Package memsize owns the size of the memory this process may use: the
// machine's, or its cgroup's limit when lower. The defaults that follow
// the machine (the store's block cache and memtables, the record cache,
// the receive budget, Go's memory limit) start from it.
package memsize

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Usable returns the memory this process may use: the machine's
// (MemTotal in /proc/meminfo) or its cgroup's limit when lower (cgroup v2
// memory.max, v1 memory.limit_in_bytes). 0 where neither is known (not
// Linux).
func Usable() uint64 {
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
