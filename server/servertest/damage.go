package servertest

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FlipTableByte damages a data directory as a failing disk or a tamperer
// would: it flips one bit in the middle of the first occurrence of pattern
// in the one table (.sst file, in dir or its index instance) that holds
// it, and returns the table's path. The test fails unless exactly one
// table holds pattern.
func FlipTableByte(t testing.TB, dir string, pattern []byte) string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sst") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		i := bytes.Index(b, pattern)
		if i < 0 {
			return nil
		}
		found = append(found, path)
		b[i+len(pattern)/2] ^= 0x10
		return os.WriteFile(path, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("%d tables hold the pattern (%v), want one", len(found), found)
	}
	return found[0]
}
