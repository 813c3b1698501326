// Package backup owns the backup format: a directory holding a consistent
// copy of the store's files and manifest.json, which names the copy's
// commit position and schema version and every file's size and SHA-256.
// It streams a copy as BackupChunks (server side), writes a stream into a
// directory checking every byte against the manifest (client side), and
// verifies and restores a backup directory. It never trusts a name or a
// size it is given: file names are plain names, offsets are contiguous,
// and a restore checks every checksum before it writes anything.
package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// FormatVersion is the layout this package writes and reads.
const FormatVersion = 1

// ManifestFile is the manifest's name in a backup directory.
const ManifestFile = "manifest.json"

// chunkSize is the data of one BackupChunk: well under every message
// limit, large enough that the stream's per-message cost is noise.
const chunkSize = 1 << 20

// Point is where a copy stands, for its manifest.
type Point struct {
	Store         string
	Position      uint64
	SchemaVersion uint64
}

// Stream sends the files of dir (a store's checkpoint) and of its
// subdirectories (the index instance's, "index"; nothing deeper) as data
// chunks, in name order, then the manifest. A file in a subdirectory is
// named "dir/name".
func Stream(dir string, pt Point, send func(*pb.BackupChunk) error) error {
	return prefix("backup", stream(dir, pt, send))
}

func stream(dir string, pt Point, send func(*pb.BackupChunk) error) error {
	names, err := files(dir)
	if err != nil {
		return err
	}
	m := &pb.BackupManifest{FormatVersion: FormatVersion, Store: pt.Store, Position: pt.Position,
		SchemaVersion: pt.SchemaVersion, Created: time.Now().UTC().Format(time.RFC3339)}
	buf := make([]byte, chunkSize)
	for _, name := range names {
		f, err := streamFile(filepath.Join(dir, name), name, buf, send)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, f)
	}
	return send(&pb.BackupChunk{Chunk: &pb.BackupChunk_Manifest{Manifest: m}})
}

func streamFile(path, name string, buf []byte, send func(*pb.BackupChunk) error) (*pb.BackupFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	var off uint64
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			h.Write(buf[:n])
			c := &pb.BackupData{File: name, Offset: off, Data: buf[:n]}
			if serr := send(&pb.BackupChunk{Chunk: &pb.BackupChunk_Data{Data: c}}); serr != nil {
				return nil, serr
			}
			off += uint64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
	}
	if off == 0 { // an empty file still has a chunk, so that it is created
		if err := send(&pb.BackupChunk{Chunk: &pb.BackupChunk_Data{Data: &pb.BackupData{File: name}}}); err != nil {
			return nil, err
		}
	}
	return &pb.BackupFile{Name: name, Size: off, Sha256: hex.EncodeToString(h.Sum(nil))}, nil
}

// files lists the regular files of dir and of its subdirectories (one
// level) by name, "sub/name" for the latter.
func files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		switch {
		case e.Type().IsRegular():
			names = append(names, e.Name())
		case e.IsDir():
			sub, err := os.ReadDir(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			for _, f := range sub {
				if f.Type().IsRegular() {
					names = append(names, e.Name()+"/"+f.Name())
				}
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

// validName reports whether name is a plain file name or one plain
// directory name, a slash and a plain file name: no "..", no deeper path,
// nothing a hostile manifest or stream could use to write elsewhere.
func validName(name string) bool {
	if name == ManifestFile {
		return false
	}
	dir, file, nested := strings.Cut(name, "/")
	if !nested {
		return plainName(name)
	}
	return plainName(dir) && plainName(file)
}

// plainName reports whether name is one path element and no special one.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." &&
		!strings.ContainsAny(name, `/\`+"\x00") && filepath.Base(name) == name
}

// subdirs returns the directories the files named in m live in, once
// each.
func subdirs(m *pb.BackupManifest) []string {
	var dirs []string
	for _, f := range m.GetFiles() {
		if dir, _, nested := strings.Cut(f.GetName(), "/"); nested && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// Receiver writes a backup stream into a directory. Not safe for
// concurrent use.
type Receiver struct {
	dir  string
	cur  *os.File // the file being written, nil between files
	name string
	off  uint64
	h    hash.Hash
	done map[string]*pb.BackupFile // files written: size and checksum as received
}

// NewReceiver prepares dir (created if missing; it must be empty).
func NewReceiver(dir string) (*Receiver, error) {
	if err := emptyDir(dir); err != nil {
		return nil, prefix("backup", err)
	}
	return &Receiver{dir: dir, done: map[string]*pb.BackupFile{}}, nil
}

// Data writes one data chunk.
func (r *Receiver) Data(c *pb.BackupData) error { return prefix("backup", r.data(c)) }

func (r *Receiver) data(c *pb.BackupData) error {
	if !validName(c.GetFile()) {
		return fmt.Errorf("stream: bad file name %q", c.GetFile())
	}
	if c.GetFile() != r.name {
		if err := r.closeFile(); err != nil {
			return err
		}
		if _, dup := r.done[c.GetFile()]; dup {
			return fmt.Errorf("stream: file %s sent twice", c.GetFile())
		}
		path := filepath.Join(r.dir, filepath.FromSlash(c.GetFile()))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		r.cur, r.name, r.off, r.h = f, c.GetFile(), 0, sha256.New()
	}
	if c.GetOffset() != r.off {
		return fmt.Errorf("stream: %s: chunk at offset %d, want %d", r.name, c.GetOffset(), r.off)
	}
	if _, err := r.cur.Write(c.GetData()); err != nil {
		return fmt.Errorf("write %s: %w", r.name, err)
	}
	r.h.Write(c.GetData())
	r.off += uint64(len(c.GetData()))
	return nil
}

func (r *Receiver) closeFile() error {
	if r.cur == nil {
		return nil
	}
	err := r.cur.Sync()
	if cerr := r.cur.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", r.name, err)
	}
	r.done[r.name] = &pb.BackupFile{Name: r.name, Size: r.off, Sha256: hex.EncodeToString(r.h.Sum(nil))}
	r.cur, r.name = nil, ""
	return nil
}

// Finish checks what was received against the manifest (every file, its
// size and checksum, nothing more) and writes manifest.json last, so that
// a directory with a manifest is a complete backup.
func (r *Receiver) Finish(m *pb.BackupManifest) error { return prefix("backup", r.finish(m)) }

func (r *Receiver) finish(m *pb.BackupManifest) error {
	if err := r.closeFile(); err != nil {
		return err
	}
	if err := checkManifest(m); err != nil {
		return err
	}
	if len(m.GetFiles()) != len(r.done) {
		return fmt.Errorf("stream: %d files received, the manifest lists %d", len(r.done), len(m.GetFiles()))
	}
	for _, f := range m.GetFiles() {
		got, ok := r.done[f.GetName()]
		if !ok {
			return fmt.Errorf("stream: %s is in the manifest but was not sent", f.GetName())
		}
		if got.GetSize() != f.GetSize() || got.GetSha256() != f.GetSha256() {
			return fmt.Errorf("stream: %s: received %d bytes (sha256 %s), the manifest says %d (%s)",
				f.GetName(), got.GetSize(), got.GetSha256(), f.GetSize(), f.GetSha256())
		}
	}
	for _, dir := range subdirs(m) {
		if err := syncDir(filepath.Join(r.dir, dir)); err != nil {
			return err
		}
	}
	return writeManifest(r.dir, m)
}

// Abort closes the file being written; the directory keeps what arrived,
// without a manifest (not a backup).
func (r *Receiver) Abort() {
	if r.cur != nil {
		_ = r.cur.Close()
		r.cur = nil
	}
}

func writeManifest(dir string, m *pb.BackupManifest) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestFile+".tmp")
	if err := writeSynced(tmp, append(b, '\n')); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, ManifestFile)); err != nil {
		return err
	}
	return syncDir(dir)
}

// checkManifest checks what a manifest says before anything trusts it.
func checkManifest(m *pb.BackupManifest) error {
	switch {
	case m == nil:
		return errors.New("no manifest")
	case m.GetFormatVersion() != FormatVersion:
		return fmt.Errorf("format version %d, this binary reads %d", m.GetFormatVersion(), FormatVersion)
	case m.GetStore() != "pebble":
		return fmt.Errorf("store %q, this binary restores pebble", m.GetStore())
	case len(m.GetFiles()) == 0:
		return errors.New("the manifest lists no files")
	}
	seen := map[string]bool{}
	for _, f := range m.GetFiles() {
		if !validName(f.GetName()) {
			return fmt.Errorf("bad file name %q in the manifest", f.GetName())
		}
		if seen[f.GetName()] {
			return fmt.Errorf("%s listed twice in the manifest", f.GetName())
		}
		seen[f.GetName()] = true
		if sum, err := hex.DecodeString(f.GetSha256()); err != nil || len(sum) != sha256.Size {
			return fmt.Errorf("%s: bad sha256 %q in the manifest", f.GetName(), f.GetSha256())
		}
	}
	return nil
}

// ReadManifest reads and checks dir's manifest.
func ReadManifest(dir string) (*pb.BackupManifest, error) {
	m, err := readManifest(dir)
	return m, prefix("backup", err)
}

func readManifest(dir string) (*pb.BackupManifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("%w (not a backup directory, or an unfinished one)", err)
	}
	m := &pb.BackupManifest{}
	if err := protojson.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	return m, checkManifest(m)
}

// Verify checks every file of the backup in dir against its manifest
// (size and SHA-256) and that no other file is there.
func Verify(dir string) (*pb.BackupManifest, error) {
	m, err := verify(dir)
	return m, prefix("backup", err)
}

func verify(dir string) (*pb.BackupManifest, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	names, err := files(dir)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{ManifestFile: true}
	for _, f := range m.GetFiles() {
		listed[f.GetName()] = true
		if err := verifyFile(filepath.Join(dir, filepath.FromSlash(f.GetName())), f); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		if !listed[n] {
			return nil, fmt.Errorf("%s is not in the manifest", n)
		}
	}
	return m, nil
}

func verifyFile(path string, f *pb.BackupFile) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, fh)
	if err != nil {
		return fmt.Errorf("read %s: %w", f.GetName(), err)
	}
	if uint64(n) != f.GetSize() {
		return fmt.Errorf("%s: %d bytes, the manifest says %d", f.GetName(), n, f.GetSize())
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.GetSha256() {
		return fmt.Errorf("%s: sha256 %s, the manifest says %s (the file is damaged)", f.GetName(), sum, f.GetSha256())
	}
	return nil
}

// Restore verifies the backup in from and, only if every file checks out,
// copies it into the data directory to (absent or empty), syncing each file
// and the directory. Files are copied into to/.restore first and moved into
// place at the end, so an interrupted restore leaves no store that opens.
func Restore(from, to string) (*pb.BackupManifest, error) {
	m, err := restore(from, to)
	return m, prefix("restore", err)
}

func restore(from, to string) (*pb.BackupManifest, error) {
	m, err := verify(from)
	if err != nil {
		return nil, err
	}
	if err := emptyDir(to); err != nil {
		return nil, err
	}
	stage := filepath.Join(to, ".restore")
	if err := os.Mkdir(stage, 0o700); err != nil {
		return nil, err
	}
	dirs := subdirs(m)
	for _, dir := range dirs {
		for _, root := range []string{stage, to} {
			if err := os.Mkdir(filepath.Join(root, dir), 0o700); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range m.GetFiles() {
		name := filepath.FromSlash(f.GetName())
		if err := copyChecked(filepath.Join(from, name), filepath.Join(stage, name), f); err != nil {
			return nil, err
		}
	}
	for _, f := range m.GetFiles() {
		name := filepath.FromSlash(f.GetName())
		if err := os.Rename(filepath.Join(stage, name), filepath.Join(to, name)); err != nil {
			return nil, err
		}
	}
	for _, dir := range dirs {
		if err := os.Remove(filepath.Join(stage, dir)); err != nil {
			return nil, err
		}
		if err := syncDir(filepath.Join(to, dir)); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(stage); err != nil {
		return nil, err
	}
	return m, syncDir(to)
}

// copyChecked copies src to dst, streaming, and checks the copy's size
// and checksum on the way (the source could change between Verify and
// the copy); dst is synced.
func copyChecked(src, dst string, f *pb.BackupFile) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", f.GetName(), err)
	}
	if uint64(n) != f.GetSize() || hex.EncodeToString(h.Sum(nil)) != f.GetSha256() {
		return fmt.Errorf("%s changed while it was restored", f.GetName())
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// emptyDir creates dir if missing and fails if it holds anything.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// prefix names the operation an error of this package's shared helpers
// failed in: a backup, or a restore (whose errors must not read as a
// backup's).
func prefix(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
