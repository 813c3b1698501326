package store

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"math/rand/v2"

	"github.com/cockroachdb/pebble/v2/vfs"
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
}

// NewMemFS returns an empty in-memory filesystem.
func NewMemFS() *MemFS {
	return &MemFS{fs: vfs.NewCrashableMem()}
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
	return &MemFS{fs: m.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keepPercent, RNG: rng})}
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
