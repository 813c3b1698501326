package server

import (
	"os"
	"runtime/debug"

	"github.com/protobase/protobase/internal/memsize"
	"github.com/protobase/protobase/internal/store/pebble"
)

// The Go runtime's soft memory limit (debug.SetMemoryLimit). Without one,
// the garbage collector lets the heap grow to twice what is live before it
// collects, so the process's resident memory was about twice the bounds
// the server keeps (the write, result and receive budgets). With it, the
// collector works harder as the heap nears the limit instead.
//
// The limit derived from the memory the process may use (memsize.Usable,
// the figure the cache defaults follow) leaves out what the storage engine
// holds outside the Go heap (the block cache and the memtables, allocated
// by Pebble itself) and an eighth of the memory for everything else.

// goMemoryLimit returns the soft limit for cfg on a process that may use
// memory bytes (0: unknown), or 0 for none.
func goMemoryLimit(cfg Config, memory uint64) int64 {
	if cfg.GoMemoryLimit != 0 {
		return max(cfg.GoMemoryLimit, 0)
	}
	if memory == 0 {
		return 0
	}
	m := int64(min(memory, 1<<62)) //nolint:gosec // bounded just above
	cache, memtable := cfg.CacheBytes, cfg.MemTableBytes
	dc, dm := pebble.DefaultSizes(memory)
	if cache <= 0 {
		cache = dc
	}
	if memtable <= 0 {
		memtable = dm
	}
	return max(m-cache-6*memtable-m/8, m/4)
}

// GoMemoryLimit returns the soft memory limit Start sets for cfg on this
// machine (0: none).
func GoMemoryLimit(cfg Config) int64 { return goMemoryLimit(cfg, memsize.Usable()) }

// setMemoryLimit applies the soft memory limit, unless the environment
// sets one (GOMEMLIMIT): the operator's word wins.
func (s *Server) setMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		s.log.Info("go memory limit from GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
		return
	}
	if limit := GoMemoryLimit(s.cfg); limit > 0 {
		debug.SetMemoryLimit(limit)
		s.log.Info("go memory limit", "bytes", limit)
	}
}
