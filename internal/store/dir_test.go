package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/store"
)

// A memtable too small for Pebble is an error, not a panic, and creates
// nothing.
func TestOpenRefusesTinyMemtable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := store.Open(store.Options{Dir: dir, MemTableBytes: 1 << 10}); err == nil || !strings.Contains(err.Error(), "MemTableBytes") {
		t.Fatalf("Open with a 1 KiB memtable: %v, want an error naming MemTableBytes", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the refused Open created %s: %v", dir, err)
	}
}
