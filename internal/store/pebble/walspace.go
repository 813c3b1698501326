package pebble

// The write-ahead log's disk space.
//
// Pebble preallocates each log file (fallocate, which du counts and ls
// does not) to 1.1 × the memtable size, whatever the memtable the file
// goes with. Its memtables start at 256 KiB and double up to the memtable
// size, and it flushes none until the queued ones hold half a memtable,
// so a store that has taken a few MiB holds several small log files, each
// reserving the full size: 141 MiB each with 128 MiB memtables, an empty
// store one of them.
//
// walSpaceFS reserves a log file's space as it is written instead: before a
// write that passes the reservation, it reserves twice what the file will
// then hold, in whole steps of walReserveStep, never beyond what Pebble
// would have reserved. A log file thus takes on disk at most twice its
// bytes plus a step, and one that fills a full-size memtable gets Pebble's
// reservation. A reservation is kept because it still does what it is for:
// the next writes find their blocks allocated, so a disk filled by others
// meanwhile fails the store's table writes (which it refuses writes for and
// recovers from, diskfull.go) before its log's (which Pebble cannot go on
// after). Pebble keeps up to MemTableStopWrites+1 obsolete log files to
// reuse (recycling: a reused file's blocks are written already, which
// spares the fsyncs allocating them); they keep their blocks, as large as
// the logs they were.
//
// A log file also writes zeros ahead of its records, within its
// reservation, up to walZeroStep beyond the end of each write. An fdatasync
// of a file whose size and blocks do not change writes only the data; one
// that follows an append must also commit the file's new size and block
// mapping to the filesystem's journal, which is shared with every other
// writer of the disk. Fallocate's reservation does not spare that (its
// blocks are marked unwritten, and writing them changes the mapping), so
// the log writes its next MiB of zeros once, and the fsyncs of the records
// that then fill it are pure data: one fsync per MiB of log commits
// metadata instead of every one. Recovery reads the zeros as the unwritten
// tail they are: Pebble ends a log's replay at a zeroed chunk when it is
// the last log, and every earlier log ends with the EOF trailer Pebble
// writes and syncs before it starts the next one.

import (
	"github.com/cockroachdb/pebble/v2/vfs"
)

// walReserveStep is the unit of a log file's reservation, and the least
// one reserves.
const walReserveStep = 1 << 20

// walZeroStep is how far beyond each write's end a log file has been
// written with zeros: the fsync after a write that passes it commits the
// file's metadata and writes out at most about this many zeros.
const walZeroStep = 1 << 20

// walZeros is what a log file writes ahead of its records (never written to).
var walZeros = make([]byte, 2*walZeroStep)

// walCategory is the category Pebble creates and reuses log files under.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

// walSpaceFS is fs whose log files reserve their space as they grow (see
// above). most is Pebble's own reservation for one (pebbleWALReserve).
type walSpaceFS struct {
	vfs.FS
	most int64
}

// pebbleWALReserve is the space Pebble reserves for each log file of a
// store with memtables of memTableBytes: 110 % of one (DB.walPreallocateSize).
func pebbleWALReserve(memTableBytes uint64) int64 {
	return int64(memTableBytes + memTableBytes/10) //nolint:gosec // memtables are at most a few GiB
}

// Create creates name; a log file reserves its space as it is written.
func (fs walSpaceFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || category != walCategory {
		return f, err
	}
	return &walFile{File: f, most: fs.most}, nil
}

// ReuseForWrite renames an obsolete file to name and opens it for writing
// from its start; a log file's blocks up to its size are its earlier use's,
// written already, and need no reservation.
func (fs walSpaceFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || category != walCategory {
		return f, err
	}
	w := &walFile{File: f, most: fs.most}
	if fi, err := f.Stat(); err == nil {
		w.reserved = fi.Size()
		w.zeroed = fi.Size()
	}
	return w, nil
}

// Unwrap returns the filesystem underneath.
func (fs walSpaceFS) Unwrap() vfs.FS { return fs.FS }

// walFile is a log file that reserves its space, and writes zeros, ahead of
// its writes. Pebble writes a log file sequentially from one goroutine at a
// time, so it needs no lock.
type walFile struct {
	vfs.File
	most     int64 // the reservation never goes beyond Pebble's own
	written  int64 // bytes written from the start of the file
	reserved int64 // bytes from the start of the file known to have blocks
	zeroed   int64 // bytes from the start of the file written, as zeros or records
}

// Write reserves space for p and what follows it when p would pass the
// reservation, writes zeros after p when p would pass what was written,
// then writes p.
func (f *walFile) Write(p []byte) (int, error) {
	end := f.written + int64(len(p))
	if end > f.reserved {
		to := walReserveEnd(end, f.most)
		// Best effort, as Pebble's own: on a full disk the write
		// itself fails, and reports it.
		if err := f.File.Preallocate(f.reserved, to-f.reserved); err == nil {
			f.reserved = to
		}
	}
	if from, to := walZeroSpan(end, f.zeroed, f.reserved); from < to {
		// Best effort too: without the zeros the fsyncs cost more, and
		// nothing else changes. Written with WriteAt, so the file's
		// offset, where p goes, stays put.
		if _, err := f.WriteAt(walZeros[:to-from], from); err == nil {
			f.zeroed = to
		}
	}
	n, err := f.File.Write(p)
	f.written += int64(n)
	return n, err
}

// Preallocate ignores Pebble's request of its fixed-size reservation:
// Write reserves instead.
func (f *walFile) Preallocate(int64, int64) error { return nil }

// walReserveEnd is where a log file's reservation ends once it holds end
// bytes: twice that, in whole steps of walReserveStep, and no further than
// Pebble's reservation in most-sized blocks would reach (most 0: no such
// bound).
func walReserveEnd(end, most int64) int64 {
	to := roundUp(2*end, walReserveStep)
	if most > 0 {
		to = min(to, roundUp(end, most))
	}
	return to
}

// walZeroSpan is the span of zeros a log file writes before a write that
// ends at end: none while end is within what was written (zeroed);
// otherwise from the later of the two to walZeroStep past end's step, but
// only within the reservation (reserved), whose blocks are the file's
// already, so that the zeros take no space the log would not have taken
// (less than 2 × walZeroStep in all). from >= to means none.
func walZeroSpan(end, zeroed, reserved int64) (from, to int64) {
	if end <= zeroed {
		return 0, 0
	}
	return max(end, zeroed), min(roundUp(end, walZeroStep)+walZeroStep, reserved)
}

// roundUp rounds n up to a multiple of step (positive).
func roundUp(n, step int64) int64 {
	return (n + step - 1) / step * step
}
