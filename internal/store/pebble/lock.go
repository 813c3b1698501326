package pebble

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
)

// openDirs holds the directories of the stores open in this process, by
// filesystem (nil for the real disk) and resolved path. Pebble's file lock
// keeps other processes out (Open maps their refusal to ErrLocked); within
// one process a second Open must be refused before Pebble, whose own check
// reports it only as text.
var openDirs struct {
	mu   sync.Mutex
	dirs map[dirClaim]struct{} // guarded by mu
}

// dirClaim names a directory: the same path on two filesystems is two
// directories.
type dirClaim struct {
	fs   *MemFS
	path string
}

// claimDir claims dir of fs for one store of this process, or returns
// ErrLocked. The returned func gives the claim up.
func claimDir(fs *MemFS, dir string) (release func(), err error) {
	path := dir
	if fs == nil {
		if path, err = filepath.Abs(dir); err != nil {
			return nil, fmt.Errorf("store: open %s: %w", dir, err)
		}
		if p, err := filepath.EvalSymlinks(path); err == nil {
			path = p
		}
	}
	key := dirClaim{fs: fs, path: path}
	openDirs.mu.Lock()
	defer openDirs.mu.Unlock()
	if _, ok := openDirs.dirs[key]; ok {
		return nil, fmt.Errorf("%w of this process: %s", ErrLocked, dir)
	}
	if openDirs.dirs == nil {
		openDirs.dirs = make(map[dirClaim]struct{})
	}
	openDirs.dirs[key] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			openDirs.mu.Lock()
			delete(openDirs.dirs, key)
			openDirs.mu.Unlock()
		})
	}, nil
}

// lockedByOther reports whether Pebble's Open failed because another
// process holds the directory's lock file.
func lockedByOther(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
}
