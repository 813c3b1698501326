package pebble

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A directory holds one open store at a time, within a process and across
// processes; closing the store frees it.
func TestOpenLockedDir(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Layout: testLayout})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, ".")} {
		if _, err := Open(Options{Dir: d, Layout: testLayout}); !errors.Is(err, ErrLocked) {
			t.Fatalf("second Open of %s: %v, want ErrLocked", d, err)
		}
	}
	if _, err := Open(Options{Dir: dir, Layout: testLayout, ReadOnly: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only Open: %v, want ErrLocked", err)
	}

	// Another process is refused by Pebble's file lock.
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenLockedDirChild$", "-test.v")
	cmd.Env = append(os.Environ(), "PROTOBASE_STORE_LOCK_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestOpenLockedDirChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Options{Dir: dir, Layout: testLayout})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenLockedDirChild is TestOpenLockedDir's other process: it passes
// when Open of the parent's directory fails with ErrLocked.
func TestOpenLockedDirChild(t *testing.T) {
	dir := os.Getenv("PROTOBASE_STORE_LOCK_DIR")
	if dir == "" {
		t.Skip("run by TestOpenLockedDir")
	}
	s, err := Open(Options{Dir: dir, Layout: testLayout})
	if err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded while another process holds the directory")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("Open: %v, want ErrLocked", err)
	}
}
