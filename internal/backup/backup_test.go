package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"000001.sst": true, "MANIFEST-000001": true, "marker.manifest.000001.MANIFEST-000001": true,
		"index/000002.sst": true, "index/" + ManifestFile: true,
		"": false, ".": false, "..": false, "../x": false, `a\b`: false, "/etc/passwd": false,
		"a\x00b": false, ManifestFile: false, "a/b/c": false, "a//b": false, "a/": false, "/a": false,
		"./a": false, "a/..": false, "../a/b": false, `a/b\c`: false, "a/\x00": false,
	} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}

func data(file string, off uint64, b string) *pb.BackupData {
	return &pb.BackupData{File: file, Offset: off, Data: []byte(b)}
}

// A stream from a hostile or broken server cannot write outside the
// directory, skip or repeat bytes, or pass off files that differ from its
// manifest.
func TestReceiverRefuses(t *testing.T) {
	good := &pb.BackupManifest{FormatVersion: FormatVersion, Store: "pebble", Files: []*pb.BackupFile{
		{Name: "a", Size: 3, Sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}, // "abc"
	}}
	tests := []struct {
		name   string
		chunks []*pb.BackupData
		m      *pb.BackupManifest
		want   string
	}{
		{"ok", []*pb.BackupData{data("a", 0, "ab"), data("a", 2, "c")}, good, ""},
		{"escape", []*pb.BackupData{data("../a", 0, "abc")}, good, "bad file name"},
		{"manifest name", []*pb.BackupData{data(ManifestFile, 0, "{}")}, good, "bad file name"},
		{"gap", []*pb.BackupData{data("a", 0, "ab"), data("a", 3, "c")}, good, "offset 3, want 2"},
		{"overlap", []*pb.BackupData{data("a", 0, "ab"), data("a", 1, "bc")}, good, "offset 1, want 2"},
		{"twice", []*pb.BackupData{data("a", 0, "abc"), data("b", 0, ""), data("a", 0, "abc")}, good, "sent twice"},
		{"damaged", []*pb.BackupData{data("a", 0, "abd")}, good, "the manifest says"},
		{"extra file", []*pb.BackupData{data("a", 0, "abc"), data("b", 0, "x")}, good, "2 files received"},
		{"missing file", []*pb.BackupData{data("b", 0, "abc")}, good, "not sent"},
		{"no manifest", []*pb.BackupData{data("a", 0, "abc")}, nil, "no manifest"},
		{"future format", []*pb.BackupData{data("a", 0, "abc")}, &pb.BackupManifest{FormatVersion: 9, Store: "pebble", Files: good.Files}, "format version 9"},
		{"bad sum", []*pb.BackupData{data("a", 0, "abc")}, &pb.BackupManifest{FormatVersion: 1, Store: "pebble", Files: []*pb.BackupFile{{Name: "a", Size: 3, Sha256: "zz"}}}, "bad sha256"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			r, err := NewReceiver(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.chunks {
				if err = r.Data(c); err != nil {
					break
				}
			}
			if err == nil {
				err = r.Finish(tc.m)
			} else {
				r.Abort()
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := Verify(dir); err != nil {
					t.Fatalf("verify: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, ManifestFile)); !os.IsNotExist(err) {
				t.Fatalf("a refused stream left a manifest: %v", err)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "a")); !os.IsNotExist(err) {
				t.Fatal("a file was written outside the backup directory")
			}
		})
	}
}

// Verify and Restore trust nothing in the directory: a file the manifest
// does not list, a missing one, a manifest naming files elsewhere, and a
// target directory that is not empty are all refused.
func TestVerifyAndRestoreRefuse(t *testing.T) {
	mk := func(t *testing.T, m *pb.BackupManifest, files map[string]string) string {
		dir := t.TempDir()
		for n, c := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := protojson.Marshal(m)
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	abc := &pb.BackupFile{Name: "a", Size: 3, Sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}
	m := &pb.BackupManifest{FormatVersion: 1, Store: "pebble", Files: []*pb.BackupFile{abc}}
	tests := []struct {
		name  string
		m     *pb.BackupManifest
		files map[string]string
		want  string
	}{
		{"extra", m, map[string]string{"a": "abc", "b": "x"}, "b is not in the manifest"},
		{"missing", m, map[string]string{}, "no such file"},
		{"short", m, map[string]string{"a": "ab"}, "2 bytes, the manifest says 3"},
		{"escape", &pb.BackupManifest{FormatVersion: 1, Store: "pebble", Files: []*pb.BackupFile{{Name: "../a", Size: 3, Sha256: abc.Sha256}}}, map[string]string{"a": "abc"}, "bad file name"},
		{"empty", &pb.BackupManifest{FormatVersion: 1, Store: "pebble"}, nil, "lists no files"},
		{"other store", &pb.BackupManifest{FormatVersion: 1, Store: "etcd", Files: []*pb.BackupFile{abc}}, map[string]string{"a": "abc"}, `store "etcd"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := mk(t, tc.m, tc.files)
			if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "backup: ") {
				t.Fatalf("verify: %v, want %q after \"backup: \"", err, tc.want)
			}
			// A restore's error is a restore's, not a backup's.
			to := filepath.Join(t.TempDir(), "data")
			if _, err := Restore(dir, to); err == nil || !strings.Contains(err.Error(), tc.want) ||
				!strings.HasPrefix(err.Error(), "restore: ") || strings.Contains(err.Error(), "backup:") {
				t.Fatalf("restore: %v, want %q after \"restore: \"", err, tc.want)
			}
			if _, err := os.Stat(to); !os.IsNotExist(err) {
				t.Fatal("a refused restore created the data directory")
			}
		})
	}
	t.Run("garbage manifest", func(t *testing.T) {
		dir := t.TempDir()
		_ = os.WriteFile(filepath.Join(dir, ManifestFile), []byte("{not json"), 0o600)
		if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), ManifestFile) {
			t.Fatalf("verify: %v", err)
		}
	})
	t.Run("target not empty", func(t *testing.T) {
		dir := mk(t, m, map[string]string{"a": "abc"})
		to := t.TempDir()
		_ = os.WriteFile(filepath.Join(to, "x"), nil, 0o600)
		if _, err := Restore(dir, to); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("restore: %v", err)
		}
	})
}

// FuzzReadManifest: whatever manifest.json holds, reading it returns a
// checked manifest or an error, never a panic, and a manifest it accepts
// names only plain files.
func FuzzReadManifest(f *testing.F) {
	f.Add([]byte(`{"formatVersion":1,"store":"pebble","position":"7","files":[{"name":"a","size":"3","sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}]}`))
	f.Add([]byte(`{"formatVersion":1,"store":"pebble","files":[{"name":"../a"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(dir)
		if err != nil {
			return
		}
		for _, f := range m.GetFiles() {
			if !validName(f.GetName()) {
				t.Fatalf("accepted file name %q", f.GetName())
			}
		}
	})
}
