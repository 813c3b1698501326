package pebble

// A full disk.
//
// When a flush or a compaction fails, Pebble schedules it again at once
// (DB.flush reschedules itself with no pause) and reports each failure as
// a background error. On a full disk every attempt fails with ENOSPC:
// left alone, Pebble rewrites the same memtable in a loop (on a 50 MB
// filesystem, more than a core of CPU, mostly compressing blocks that
// cannot be written) and reports each failure (about 100,000 log lines a
// minute), while writes fill the remaining memtables and then wait,
// without end, for a flush that cannot happen: a client hears nothing
// until its deadline.
//
// diskState turns that into a state the store reports and acts on:
//
//   - A flush of either instance failing with ENOSPC marks that instance
//     full; while one is, Apply refuses batches at once with store.ErrDiskFull
//     instead of letting them fill the memtables and stall. Reads go on.
//     Pebble keeps the memtable and tries its flush again, so the state
//     always ends: a flush or compaction of that instance that writes a
//     table and completes marks it no longer full.
//   - A compaction failing with ENOSPC does not stop writes (Pebble sets
//     its key span aside for a while and may not try it again soon): the
//     flushes that follow meet the full disk if it is.
//   - A sync of the write-ahead log failing with ENOSPC marks the log
//     full for good: Pebble cannot append to a log after a failed write,
//     and stops the process at the next commit. Writes are refused until
//     a restart, which opens a new log.
//   - After a failed flush or compaction, the next job of the instance
//     waits before it writes its first table (the TableCreated event,
//     which Pebble calls without holding its mutex): 100 ms, doubling to
//     5 s, so the retries cost next to nothing and a freed disk is noticed
//     within 5 s.
//   - Background errors are logged at most once every 10 s, with the
//     number of failures since the last line; a line says when space is
//     back after one said writes are refused.

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/protobase/protobase/internal/lograte"
	"github.com/protobase/protobase/internal/store"
)

// The retry pauses of a failing background job. Its errors are logged at
// most once per lograte.Every.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

// instance names what diskState tracks: each of a store's Pebble
// instances, and the write-ahead log.
type instance int

const (
	instMain instance = iota
	instIndex
	instLog
	instances
)

func (i instance) String() string {
	return [...]string{"main", "index", "log"}[i]
}

// diskState is what a store knows of its disk's health; safe for
// concurrent use.
type diskState struct {
	dir    string
	logger *slog.Logger
	stop   chan struct{} // closed by Store.Close: pauses end at once
	// stopOnce guards closing stop.
	stopOnce sync.Once

	full    [instances]atomic.Bool
	refused atomic.Int64 // batches Apply refused with store.ErrDiskFull

	mu sync.Mutex
	// failures counts each instance's background jobs failed in a row.
	failures [instances]int
	// writing holds each instance's jobs that created a table and have not
	// ended: a job pauses before its first table only.
	writing [instances]map[int]bool
	// becameFull is closed when an instance becomes full (and replaced).
	becameFull chan struct{}
	// fullLog, compactLog and errLog rate-limit the lines of a full disk
	// refusing writes, of one failing compactions only, and of other
	// background errors; fullLogged is whether a line saying writes are
	// refused went out after the last one saying space is back (which
	// then has to follow).
	fullLog, compactLog, errLog lograte.Limiter
	fullLogged                  bool
	// refusedAtFull is refused when the first line of the current run of
	// full disk lines went out: the lines count the writes refused since.
	refusedAtFull int64
}

func newDiskState(dir string, logger *slog.Logger) *diskState {
	d := &diskState{dir: dir, logger: logger, stop: make(chan struct{}), becameFull: make(chan struct{})}
	for i := range d.writing {
		d.writing[i] = map[int]bool{}
	}
	return d
}

// isFull reports whether either instance cannot write its tables.
func (d *diskState) isFull() bool {
	for i := range d.full {
		if d.full[i].Load() {
			return true
		}
	}
	return false
}

// errLogFull is store.ErrDiskFull once the write-ahead log could not be
// written.
var errLogFull = fmt.Errorf("%w; the write-ahead log could not be written: restart the server once space is freed", store.ErrDiskFull)

// refuse counts a batch refused for the full disk and returns the error.
func (d *diskState) refuse() error {
	d.refused.Add(1)
	if d.full[instLog].Load() {
		return errLogFull
	}
	return store.ErrDiskFull
}

// watch reports whether the disk is full and, when it is not, returns a
// channel closed once it becomes full.
func (d *diskState) watch() (bool, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.isFull(), d.becameFull
}

// close ends the pauses of background jobs: the store is closing.
func (d *diskState) close() { d.stopOnce.Do(func() { close(d.stop) }) }

// noteNoSpaceLocked records that inst could not write for a full disk.
// The caller holds d.mu.
func (d *diskState) noteNoSpaceLocked(inst instance) {
	if d.full[inst].Load() {
		return
	}
	if !d.isFull() {
		close(d.becameFull)
		d.becameFull = make(chan struct{})
	}
	d.full[inst].Store(true)
}

// noteSyncError records a failed sync of the write-ahead log: one for a
// full disk marks the log full, so that writes are refused before Pebble
// meets its failed log again, which it cannot survive.
func (d *diskState) noteSyncError(err error) {
	if !vfs.IsNoSpaceError(err) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.noteNoSpaceLocked(instLog)
	d.logFullLocked(instLog, err)
}

// backgroundError is Pebble's BackgroundError event for inst: a flush or
// compaction failed, and Pebble will try it again. For a flush, FlushEnd
// came first.
func (d *diskState) backgroundError(inst instance, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failures[inst]++
	if vfs.IsNoSpaceError(err) {
		d.logFullLocked(inst, err)
		return
	}
	if n, ok := d.errLog.Allow(); ok {
		d.logger.Error("store: background error", "instance", inst.String(), "err", err, "held_back", n-1)
	}
}

// logFullLocked logs the full disk, at most once per lograte.Every. The
// caller holds d.mu.
func (d *diskState) logFullLocked(inst instance, err error) {
	if !d.isFull() {
		if n, ok := d.compactLog.Allow(); ok {
			d.logger.Error("store: the disk is full: compactions wait for space",
				"dir", d.dir, "instance", inst.String(), "err", err, "failures_held_back", n-1)
		}
		return
	}
	n, ok := d.fullLog.Allow()
	if !ok {
		return
	}
	if !d.fullLogged {
		d.refusedAtFull = d.refused.Load()
	}
	d.fullLogged = true
	msg := "store: the disk is full: writes are refused until space is freed"
	if d.full[instLog].Load() {
		msg = "store: the disk is full: the write-ahead log could not be written: writes are refused until a restart"
	}
	d.logger.Error(msg, "dir", d.dir, "instance", inst.String(), "err", err,
		"failures_held_back", n-1, "writes_refused", d.refused.Load()-d.refusedAtFull)
}

// tableCreated is Pebble's TableCreated event for inst: a flush or a
// compaction begins a table. The first table of a job that follows a
// failed one waits first, so that Pebble's retries come at a growing
// interval instead of in a loop. Pebble calls it on the job's goroutine
// without holding its mutex: waiting here holds up that job only.
func (d *diskState) tableCreated(inst instance, job int) {
	d.mu.Lock()
	first := !d.writing[inst][job]
	d.writing[inst][job] = true
	n := d.failures[inst]
	d.mu.Unlock()
	if !first || n == 0 {
		return
	}
	t := time.NewTimer(retryPause(n))
	defer t.Stop()
	select {
	case <-t.C:
	case <-d.stop:
	}
}

// retryPause is the pause before the job that follows n failed ones.
func retryPause(n int) time.Duration {
	p := retryFirst
	for i := 1; i < n && p < retryMax; i++ {
		p *= 2
	}
	return min(p, retryMax)
}

// jobEnd is Pebble's FlushEnd or CompactionEnd event for inst. A flush
// that failed for a full disk marks inst full; a job that wrote a table
// and succeeded shows the disk takes tables again.
func (d *diskState) jobEnd(inst instance, job int, err error, flush bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	wrote := d.writing[inst][job]
	delete(d.writing[inst], job)
	if flush && vfs.IsNoSpaceError(err) {
		d.noteNoSpaceLocked(inst)
	}
	if err != nil || !wrote {
		return
	}
	d.failures[inst] = 0
	if !d.full[inst].Load() {
		return
	}
	d.full[inst].Store(false)
	// Said only after a line said writes are refused: on a disk that fills
	// and frees again and again, these lines stay as rare as those.
	if !d.isFull() && d.fullLogged {
		d.fullLogged = false
		d.logger.Info("store: disk space is back: writes are accepted again",
			"dir", d.dir, "writes_refused", d.refused.Load()-d.refusedAtFull)
	}
}

// eventListener returns inst's Pebble event listener: damaged tables,
// write stalls for the metrics, background errors, and the jobs' tables
// for diskState.
func (s *Store) eventListener(inst instance) *pebble.EventListener {
	d := s.disk
	return &pebble.EventListener{
		// Without a listener Pebble ends the process on a damaged
		// block (its logger's Fatalf): one read of one bad table, such
		// as a watcher reaching a damaged change-log entry or check
		// reading it, would stop the server, again at every restart.
		// The read fails with the corruption error instead, naming the
		// table; the rest of the store goes on serving.
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			s.logger.Error("storage: a table is damaged; reads of its keys fail (restore from a backup)",
				"file", info.Path, "bounds", info.Bounds.String(), "err", info.Details)
		},
		WriteStallBegin: func(pebble.WriteStallBeginInfo) {
			s.stalls.Add(1)
			s.stallStart.Store(time.Now().UnixNano())
		},
		WriteStallEnd: func() {
			if start := s.stallStart.Swap(0); start != 0 {
				s.stallNanos.Add(time.Now().UnixNano() - start)
			}
		},
		BackgroundError: func(err error) { d.backgroundError(inst, err) },
		TableCreated:    func(i pebble.TableCreateInfo) { d.tableCreated(inst, i.JobID) },
		FlushEnd:        func(i pebble.FlushInfo) { d.jobEnd(inst, i.JobID, i.Err, true) },
		CompactionEnd: func(i pebble.CompactionInfo) {
			if errors.Is(i.Err, pebble.ErrCancelledCompaction) {
				i.Err = nil // cancelled, not failed: nothing to learn of the disk
			}
			d.jobEnd(inst, i.JobID, i.Err, false)
		},
	}
}

// errStopped is waitFlushed's error when its stop channel closed first.
var errStopped = errors.New("store: stopped")

// waitFlushed waits for a flush (AsyncFlush's channel) to finish, or
// returns store.ErrDiskFull once the disk is full (Pebble retries the flush
// until space is freed, and waiting for it would hang the caller as
// long), or errStopped once stop (nil: none) is closed.
func (s *Store) waitFlushed(flushed, stop <-chan struct{}) error {
	for {
		full, became := s.disk.watch()
		if full {
			select {
			case <-flushed:
				return nil
			default:
				return store.ErrDiskFull
			}
		}
		select {
		case <-flushed:
			return nil
		case <-became:
		case <-stop:
			return errStopped
		}
	}
}

// flushDB flushes db's memtables and waits for the flush, or returns
// store.ErrDiskFull as waitFlushed does.
func (s *Store) flushDB(db *pebble.DB) error {
	flushed, err := db.AsyncFlush()
	if err != nil {
		return err
	}
	return s.waitFlushed(flushed, nil)
}
