package server_test

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

// filesOf returns the names and contents of the files directly in dir.
func filesOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

// A DataDir holding another program's files is refused with an error
// that says so, and its files stay as they were (Pebble deleted a
// temporary.*.dbtmp it found and replayed a NNNNNN.log as its WAL).
func TestStartRefusesForeignDataDir(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"temporary.000004.dbtmp": "another program's half-written file",
		"000003.log":             "another program's log",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := filesOf(t, dir)
	_, err := server.Start(t.Context(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "not a Protobase data directory") ||
		!strings.Contains(err.Error(), "000003.log, temporary.000004.dbtmp") {
		t.Fatalf("start on another program's directory: %v, want a not-a-data-directory error naming its files", err)
	}
	if after := filesOf(t, dir); !maps.Equal(before, after) {
		t.Fatalf("the refused start changed the directory: %q, was %q", after, before)
	}
}

// A data directory of an earlier version, without the marker file, opens
// with its records and is marked.
func TestStartOpensUnmarkedDataDir(t *testing.T) {
	ts := startServer(t, server.Config{NoSync: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`)})
	ts.Stop()
	ts.C = nil
	marker := filepath.Join(ts.Cfg.DataDir, pebble.MarkerFile)
	if err := os.Remove(marker); err != nil {
		t.Fatalf("a new data directory has no marker: %v", err)
	}
	ts = startServer(t, ts.Cfg)
	if n := ts.Count("shop.User"); n != 1 {
		t.Fatalf("%d records after reopening the unmarked directory, want 1", n)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the reopened directory was not marked: %v", err)
	}
}
