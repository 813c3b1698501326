package pebble

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Metrics is a summary of the store's size and health, taken from Pebble's
// metrics at one instant. The zero value is returned for a closed store.
type Metrics struct {
	// DiskBytes is the total on-disk footprint: live sstables and blob
	// files, WAL files, manifest and options files, plus obsolete files not
	// yet deleted.
	DiskBytes uint64
	// TableBytes is the size of the live sstables (all levels).
	TableBytes uint64
	// Tables is the number of live sstables (all levels).
	Tables int64
	// L0Tables and L0Sublevels describe level 0; a growing L0 means
	// compactions are falling behind ingest (L0Sublevels is L0's read
	// amplification; writes stop at 36).
	L0Tables    int64
	L0Sublevels int32
	// ReadAmp is the number of sstable "layers" a point read may consult.
	ReadAmp int
	// MemTableBytes is the memory allocated to memtables (active plus queued
	// for flush) and MemTables their count.
	MemTableBytes uint64
	MemTables     int64
	// WALBytes is the on-disk size of the live write-ahead log files and
	// WALFiles their count.
	WALBytes uint64
	WALFiles int64
	// BlockCacheBytes is the block cache's current size; hits and misses are
	// cumulative since Open.
	BlockCacheBytes  int64
	BlockCacheHits   int64
	BlockCacheMisses int64
	// FilterHits counts sstable reads avoided by bloom filters (cumulative).
	FilterHits int64
	// Flushes and Compactions are cumulative counts since Open.
	Flushes     int64
	Compactions int64
	// FlushedBytes and CompactedBytes count the sstable bytes written by
	// flushes and by compactions since Open: the background work ingest
	// costs, beside the write-ahead log.
	FlushedBytes   uint64
	CompactedBytes uint64
	// CompactionDebtBytes estimates the bytes compactions must still rewrite
	// to bring the LSM into shape.
	CompactionDebtBytes uint64
	// WriteStalls counts write stalls (memtables or L0 full) since Open and
	// WriteStallTime their cumulative duration (excluding an ongoing stall).
	WriteStalls    int64
	WriteStallTime time.Duration
	// DiskFull is true while the disk has no space for the store's
	// tables and writes are refused (store.ErrDiskFull); DiskFullRefused counts
	// the batches refused for it since Open.
	DiskFull        bool
	DiskFullRefused int64
}

// Metrics returns a summary of the store's size and health.
func (s *Store) Metrics() Metrics {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return Metrics{}
	}
	out := metricsOf(s.db.Metrics())
	out.WriteStalls = s.stalls.Load()
	out.WriteStallTime = time.Duration(s.stallNanos.Load())
	out.DiskFull = s.disk.isFull()
	out.DiskFullRefused = s.disk.refused.Load()
	if s.index != nil {
		out.add(metricsOf(s.index.db.Metrics()))
	}
	return out
}

// add adds the index instance's figures to m's: sizes, counts and work
// add up, level 0 and read amplification are the larger one's (a read
// consults one instance), and the cache is the one they share.
func (m *Metrics) add(ix Metrics) {
	m.DiskBytes += ix.DiskBytes
	m.TableBytes += ix.TableBytes
	m.Tables += ix.Tables
	m.L0Tables += ix.L0Tables
	m.L0Sublevels = max(m.L0Sublevels, ix.L0Sublevels)
	m.ReadAmp = max(m.ReadAmp, ix.ReadAmp)
	m.MemTableBytes += ix.MemTableBytes
	m.MemTables += ix.MemTables
	m.FilterHits += ix.FilterHits
	m.Flushes += ix.Flushes
	m.Compactions += ix.Compactions
	m.FlushedBytes += ix.FlushedBytes
	m.CompactedBytes += ix.CompactedBytes
	m.CompactionDebtBytes += ix.CompactionDebtBytes
}

// metricsOf summarizes one instance's metrics.
func metricsOf(m *pebble.Metrics) Metrics {
	total := m.Total()
	out := Metrics{
		DiskBytes:           m.DiskSpaceUsage(),
		TableBytes:          uint64(total.TablesSize),
		Tables:              total.TablesCount,
		L0Tables:            m.Levels[0].TablesCount,
		L0Sublevels:         m.Levels[0].Sublevels,
		ReadAmp:             m.ReadAmp(),
		MemTableBytes:       m.MemTable.Size,
		MemTables:           m.MemTable.Count,
		WALBytes:            m.WAL.PhysicalSize,
		WALFiles:            m.WAL.Files,
		BlockCacheBytes:     m.BlockCache.Size,
		BlockCacheHits:      m.BlockCache.Hits,
		BlockCacheMisses:    m.BlockCache.Misses,
		FilterHits:          m.Filter.Hits,
		Flushes:             m.Flush.Count,
		Compactions:         m.Compact.Count,
		CompactionDebtBytes: m.Compact.EstimatedDebt,
	}
	// Summed by hand: Total() adds the WAL's bytes to the flushed ones.
	for i := range m.Levels {
		out.FlushedBytes += m.Levels[i].TableBytesFlushed
		out.CompactedBytes += m.Levels[i].TableBytesCompacted
	}
	return out
}

// String renders the metrics on one line for humans (logs, debug output).
func (m Metrics) String() string {
	return fmt.Sprintf(
		"disk=%s tables=%d (%s, L0 %d in %d sublevels, read-amp %d) memtables=%d (%s) wal=%d files (%s) "+
			"cache=%s hits=%d misses=%d filter-hits=%d flushes=%d compactions=%d debt=%s stalls=%d (%s) disk-full=%v (%d refused)",
		bytesString(m.DiskBytes), m.Tables, bytesString(m.TableBytes), m.L0Tables, m.L0Sublevels, m.ReadAmp,
		m.MemTables, bytesString(m.MemTableBytes), m.WALFiles, bytesString(m.WALBytes),
		bytesString(uint64(max(m.BlockCacheBytes, 0))), m.BlockCacheHits, m.BlockCacheMisses, m.FilterHits,
		m.Flushes, m.Compactions, bytesString(m.CompactionDebtBytes), m.WriteStalls, m.WriteStallTime.Round(time.Millisecond),
		m.DiskFull, m.DiskFullRefused)
}

// DebugString returns Pebble's full multi-line metrics table (per-level
// sizes, compaction and cache statistics) for troubleshooting, or "" for a
// closed store.
func (s *Store) DebugString() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return ""
	}
	if s.index != nil {
		return s.db.Metrics().String() + "\nindex instance:\n" + s.index.db.Metrics().String()
	}
	return s.db.Metrics().String()
}

func bytesString(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := uint64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
