package pebble

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// MarkerFile names the file that marks a directory as a Protobase store.
// Open writes it into a directory it creates (or finds empty) before
// Pebble writes anything, and into a store made before the marker
// existed once it has recognised it, so that it never opens, and so never
// rewrites, another program's files: Pebble deletes the temporary files
// it finds and replays any NNNNNN.log as its own write-ahead log.
const MarkerFile = "PROTOBASE"

// markerText is the marker's content, for a person who finds the file.
const markerText = "This directory is a Protobase store (Pebble files). Do not edit or remove its files.\n"

// ErrNotStore is returned (wrapped) by Open for a directory that holds
// files but is not a Protobase store.
var ErrNotStore = errors.New("store: not a Protobase data directory")

// ignoredEntries are directory entries that do not make a directory
// used: a filesystem's own (the root of an ext4 volume holds lost+found).
var ignoredEntries = []string{"lost+found"}

// dirKind is what Open finds in its directory.
type dirKind int

const (
	dirNew    dirKind = iota // missing or empty: a store is created there
	dirMarked                // holds the marker: a Protobase store
	dirLegacy                // a Protobase store made before the marker
)

// openDir readies o.Dir for Pebble: it refuses a directory that is not a
// Protobase store (ErrNotStore) and, unless read-only, creates a missing
// one and marks a new one before Pebble writes there.
func openDir(fs vfs.FS, o Options, layout *keyLayout) (dirKind, error) {
	kind, err := classifyDir(fs, o.Dir, layout)
	if err != nil {
		return 0, err
	}
	if o.ReadOnly {
		fi, err := fs.Stat(o.Dir)
		if err != nil {
			return 0, fmt.Errorf("store: open %s read-only: %w", o.Dir, err)
		}
		if !fi.IsDir() {
			return 0, fmt.Errorf("store: open %s read-only: not a directory", o.Dir)
		}
		return kind, nil
	}
	if err := createDir(fs, o.Dir); err != nil {
		return 0, fmt.Errorf("store: create %s: %w", o.Dir, err)
	}
	if kind == dirNew {
		if err := writeMarker(fs, o.Dir); err != nil {
			return 0, err
		}
	}
	return kind, nil
}

// classifyDir tells what dir holds, without writing to it: a new
// directory, a marked store, a store of an earlier version (Pebble's files
// holding Protobase's own keys), or ErrNotStore. A store of an earlier
// version is read with Pebble read-only, which replays its log in memory
// and deletes nothing.
func classifyDir(fs vfs.FS, dir string, layout *keyLayout) (dirKind, error) {
	names, err := fs.List(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return dirNew, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: open %s: %w", dir, err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return slices.Contains(ignoredEntries, n) })
	switch {
	case len(names) == 0:
		return dirNew, nil
	case slices.Contains(names, MarkerFile):
		return dirMarked, nil
	}
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "MANIFEST-") }) {
		return 0, notStore(dir, names, "no "+MarkerFile+" file and no Pebble store")
	}
	ok, err := holdsProtobaseKeys(fs, dir, layout)
	if err != nil {
		if lockedByOther(err) {
			return 0, fmt.Errorf("%w: %w", ErrLocked, err)
		}
		return 0, notStore(dir, names, "a Pebble store Protobase cannot read: "+err.Error())
	}
	if !ok {
		return 0, notStore(dir, names, "a Pebble store without Protobase's keys")
	}
	return dirLegacy, nil
}

// holdsProtobaseKeys opens the Pebble store in dir read-only and reports
// whether it holds one of the keys every Protobase store has: the mark of
// the index instance (written at every open of the store) or one of the
// layout's KnownKeys (the engine's: the secret that signs page tokens,
// written at its first open, and the schema).
func holdsProtobaseKeys(fs vfs.FS, dir string, layout *keyLayout) (bool, error) {
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, ReadOnly: true, Logger: newPebbleLogger(nil)})
	if err != nil {
		return false, err
	}
	defer db.Close()
	for _, k := range append([][]byte{layout.mark}, layout.known...) {
		_, closer, err := db.Get(k)
		if err == nil {
			_ = closer.Close()
			return true, nil
		}
		if !errors.Is(err, pebble.ErrNotFound) {
			return false, err
		}
	}
	return false, nil
}

// notStore is the ErrNotStore of dir, naming a few of its entries.
func notStore(dir string, names []string, what string) error {
	slices.Sort(names)
	shown := names
	if len(shown) > 3 {
		shown = shown[:3]
	}
	return fmt.Errorf("%w: %s holds %d entries (%s) and %s; give an empty or new directory, "+
		"or the data directory of a Protobase server", ErrNotStore, dir, len(names), strings.Join(shown, ", "), what)
}

// writeMarker writes the marker into dir and syncs it and its entry.
func writeMarker(fs vfs.FS, dir string) error {
	name := fs.PathJoin(dir, MarkerFile)
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("store: write %s: %w", name, err)
	}
	_, err = f.Write([]byte(markerText))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: write %s: %w", name, err)
	}
	return syncDir(fs, dir)
}
