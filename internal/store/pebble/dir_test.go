package pebble_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
)

// A memtable too small for Pebble is an error, not a panic, and creates
// nothing.
func TestOpenRefusesTinyMemtable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, MemTableBytes: 1 << 10}); err == nil || !strings.Contains(err.Error(), "MemTableBytes") {
		t.Fatalf("Open with a 1 KiB memtable: %v, want an error naming MemTableBytes", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the refused Open created %s: %v", dir, err)
	}
}

// snapshotDir returns every file under dir with its content, to check
// that a refused Open left them as they were.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[strings.TrimPrefix(p, dir)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Another program's files are refused, and left untouched: Pebble would
// have deleted the temporary file and replayed the .log as its own WAL.
func TestOpenRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"temporary.000004.dbtmp": "half-written table of another program",
		"000003.log":             "another program's log, not a Pebble WAL",
		"notes.txt":              "mine",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshotDir(t, dir)
	_, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}})
	if !errors.Is(err, pebble.ErrNotStore) || !strings.Contains(err.Error(), "000003.log, notes.txt, temporary.000004.dbtmp") {
		t.Fatalf("Open of a foreign directory: %v, want ErrNotStore naming its files", err)
	}
	if after := snapshotDir(t, dir); !maps.Equal(before, after) {
		t.Fatalf("the refused Open changed the directory: %q, was %q", after, before)
	}
}

// Another program's Pebble store is refused too, and left as it was:
// Open reads it read-only and finds none of Protobase's keys.
func TestOpenRefusesForeignPebbleStore(t *testing.T) {
	dir := t.TempDir()
	db, err := pebbledb.Open(dir, &pebbledb.Options{Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("user/1"), []byte("someone else's"), pebbledb.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	_, err = pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}})
	if !errors.Is(err, pebble.ErrNotStore) || !strings.Contains(err.Error(), "a Pebble store without Protobase's keys") {
		t.Fatalf("Open of another program's Pebble store: %v, want ErrNotStore", err)
	}
	if _, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, ReadOnly: true}); !errors.Is(err, pebble.ErrNotStore) {
		t.Fatalf("read-only Open of another program's Pebble store: %v, want ErrNotStore", err)
	}
	if after := snapshotDir(t, dir); !maps.Equal(before, after) {
		t.Fatalf("the refused Open changed the store's files")
	}
}

// A new store is marked; a store made before the marker (Pebble's files
// holding Protobase's keys, no marker) opens and is marked; an empty
// volume's lost+found does not make its root a used directory.
func TestOpenMarksStores(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	s, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Stamp(1)
	b.Set([]byte(keyspace.SecretKey), make([]byte, 32))
	b.Set([]byte("\x01record"), []byte("kept"))
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, pebble.MarkerFile)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("a new store has no marker: %v", err)
	}

	// As an earlier version left it.
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	ro, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of a store without the marker: %v", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a read-only Open wrote the marker: %v", err)
	}
	s, err = pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatalf("Open of a store without the marker: %v", err)
	}
	v, found, err := s.Get([]byte("\x01record"), nil)
	if err != nil || !found || string(v) != "kept" {
		t.Fatalf("the record of the earlier store: %q %v %v", v, found, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the earlier store was not marked: %v", err)
	}

	vol := t.TempDir()
	if err := os.Mkdir(filepath.Join(vol, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(pebble.Options{Dir: vol, Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatalf("Open of a volume root holding lost+found: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// quiet is a Pebble logger that drops its informational lines.
type quiet struct{}

func (quiet) Infof(string, ...any)         {}
func (quiet) Errorf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (quiet) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
