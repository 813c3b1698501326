package pebble

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// MemFS is an in-memory filesystem for a store (Options.FS) that remembers
// which bytes and directory entries were synced, so that a test can cut
// the power: killing the process leaves the kernel's page cache to be
// written, a power cut does not, and only the second tests that an
// acknowledged write was really fsynced.
//
// A MemFS is safe for concurrent use; PowerCut may be called while a store
// is writing to it and sees one instant of it.
type MemFS struct {
	fs *vfs.MemFS // crashable: it tracks synced data beside written data
	// full makes writes fail as on a full disk (SetDiskFull); noSpace
	// counts the writes it failed.
	full    atomic.Bool
	noSpace atomic.Int64
	// vfs is fs as the store sees it: fs with full's failures.
	vfs vfs.FS
}

// NewMemFS returns an empty in-memory filesystem.
func NewMemFS() *MemFS {
	return newMemFS(vfs.NewCrashableMem())
}

func newMemFS(fs *vfs.MemFS) *MemFS {
	m := &MemFS{fs: fs}
	m.vfs = errorfs.Wrap(fs, errorfs.InjectorFunc(m.inject))
	return m
}

// SetDiskFull makes the filesystem behave as a full disk (true) or one
// with space again (false). While full, every write to a file fails with
// ENOSPC, except those to write-ahead logs: a log reserves its space
// ahead of its writes (walspace.go), or reuses an old log's blocks, so on
// a full disk the tables fail first. Creating, renaming, syncing and removing
// files go on.
func (m *MemFS) SetDiskFull(full bool) { m.full.Store(full) }

// NoSpaceErrors returns how many writes failed with ENOSPC since the
// filesystem was made.
func (m *MemFS) NoSpaceErrors() int64 { return m.noSpace.Load() }

// inject is the errorfs injector of SetDiskFull.
func (m *MemFS) inject(op errorfs.Op) error {
	if !m.full.Load() {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate:
	default:
		return nil
	}
	if strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	m.noSpace.Add(1)
	return &iofs.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
}

// PowerCut returns a new filesystem holding what a machine would find on
// its disk after losing power at this instant: every byte and directory
// entry that was synced and, of what was not, each 4 KiB block and each
// entry with probability keepPercent/100 (drawn from rng; rng may be nil
// when keepPercent is 0). keepPercent 0 drops every unsynced byte; a
// positive one also leaves torn writes, unsynced blocks surviving beside
// zeroed ones. m itself is not changed: the store still open on it goes
// on, and its later writes do not reach the copy.
func (m *MemFS) PowerCut(rng *rand.Rand, keepPercent int) *MemFS {
	return newMemFS(m.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keepPercent, RNG: rng}))
}

// createDir creates dir and any missing parents, and syncs the parent of
// each directory it created: a new directory's entry is in its parent, and
// without that sync a power cut soon after Open could lose the whole store
// (Pebble syncs the entries inside dir, not dir's own).
func createDir(fs vfs.FS, dir string) error {
	var created []string // outermost last
	for d := dir; ; d = fs.PathDir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if fs.PathDir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := syncDir(fs, fs.PathDir(created[i])); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(fs vfs.FS, dir string) error {
	f, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
