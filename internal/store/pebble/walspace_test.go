package pebble

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A log file reserves twice what it holds in whole MiB, at least 1 MiB,
// and never beyond Pebble's own reservation in blocks of most bytes.
func TestWALReserveEnd(t *testing.T) {
	const mib = 1 << 20
	most := pebbleWALReserve(128 << 20) // 140.8 MiB
	for _, c := range []struct{ end, most, want int64 }{
		{1, most, mib},
		{mib / 2, most, mib},
		{mib/2 + 1, most, 2 * mib},
		{3*mib + 300<<10, most, 7 * mib},
		{60 * mib, most, 120 * mib},
		{80 * mib, most, most},
		{most + 1, most, 2 * most},
		{3 * mib, 0, 6 * mib},
		{3 * mib, 4 * mib, 4 * mib},
	} {
		if got := walReserveEnd(c.end, c.most); got != c.want {
			t.Errorf("walReserveEnd(%d, %d) = %d, want %d", c.end, c.most, got, c.want)
		}
	}
}

// A write passing what the log file has written makes it write zeros
// from the write's end (or what was written, if later) to a step past the
// write's step, within the reservation.
func TestWALZeroSpan(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ end, zeroed, reserved, from, to int64 }{
		{1, 0, mib, 1, mib},
		{1, 0, 4 * mib, 1, 2 * mib},
		{mib, 0, 2 * mib, mib, 2 * mib},
		{5*mib + 7, 5 * mib, 11 * mib, 5*mib + 7, 7 * mib},
		{3 * mib, 3*mib - 10, 6 * mib, 3 * mib, 4 * mib},
		{3 * mib, 3*mib - 10, 3 * mib, 3 * mib, 3 * mib}, // reservation failed: none
		{mib, 2 * mib, 4 * mib, 0, 0},                    // within the zeros: none
	} {
		from, to := walZeroSpan(c.end, c.zeroed, c.reserved)
		if from != c.from || to != c.to {
			t.Errorf("walZeroSpan(%d, %d, %d) = %d, %d, want %d, %d", c.end, c.zeroed, c.reserved, from, to, c.from, c.to)
		}
		if to-from > int64(len(walZeros)) {
			t.Errorf("walZeroSpan(%d, %d, %d): span of %d bytes, zeros hold %d", c.end, c.zeroed, c.reserved, to-from, len(walZeros))
		}
	}
}

// logFiles returns the write-ahead log files in dir, by name.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(logs)
	return logs
}

// fileSize returns name's size.
func fileSize(t *testing.T, name string) int64 {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// Durable commits that fit in the zeros ahead of the log's records leave
// the log file's size as it was, so their fsyncs write data only; the file
// ends in zeros; and a copy of the store taken while it is open, as a
// killed process leaves it, opens with every acknowledged write.
func TestWALWritesZerosAhead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	s := openT(t, dir, true)
	commitT(t, s, func(b *Batch) { b.Set([]byte("k-first"), []byte("v")) })
	logs := logFiles(t, dir)
	if len(logs) != 1 {
		t.Fatalf("log files %v, want one", logs)
	}
	size := fileSize(t, logs[0])
	if size != walReserveStep {
		t.Fatalf("log file of %d bytes after one small write, want %d (zeros to the end of its reservation)", size, walReserveStep)
	}
	for i := range 200 {
		commitT(t, s, func(b *Batch) { b.Set(fmt.Appendf(nil, "k%04d", i), bytes.Repeat([]byte{'v'}, 100)) })
		if got := fileSize(t, logs[0]); got != size {
			t.Fatalf("after commit %d the log file is %d bytes, was %d: the commit appended", i, got, size)
		}
	}
	data, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	if tail := data[len(data)-walReserveStep/2:]; !bytes.Equal(tail, walZeros[:len(tail)]) {
		t.Fatal("the log file does not end in zeros")
	}

	killed := filepath.Join(t.TempDir(), "killed")
	copyTree(t, dir, killed)
	c := openT(t, killed, true)
	wantValue(t, c, "k-first", "v")
	wantValue(t, c, "k0199", strings.Repeat("v", 100))
}

// Logs that end in zeros replay in order when several are unflushed: the
// earlier ones end with Pebble's EOF trailer before their zeros, the last
// one at its zeros.
func TestWALZerosReplayManyLogs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	s := openT(t, dir, true)
	const n = 96
	value := bytes.Repeat([]byte{'x'}, 256<<10)
	for i := range n { // 24 MiB through 4 MiB memtables: several logs
		commitT(t, s, func(b *Batch) { b.Set(fmt.Appendf(nil, "k%03d", i), value) })
	}
	// The copy is taken file by file: a flush or compaction finishing
	// meanwhile could leave it a manifest naming a table listed too late
	// to be copied, which no crash leaves.
	waitIdle(t, s)
	killed := filepath.Join(t.TempDir(), "killed")
	copyTree(t, dir, killed)
	t.Logf("%d log files in the copy", len(logFiles(t, killed)))
	c := openT(t, killed, true)
	for i := range n {
		if v, ok := mustGet(t, c, fmt.Sprintf("k%03d", i)); !ok || v != string(value) {
			t.Fatalf("k%03d: %d bytes, found %v, after reopening a copy", i, len(v), ok)
		}
	}
}

// waitIdle waits until s's main instance runs no flush or compaction, seen
// twice 10 ms apart.
func waitIdle(t *testing.T, s *Store) {
	t.Helper()
	idle := 0
	for deadline := time.Now().Add(30 * time.Second); idle < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the store's flushes and compactions did not stop within 30 s")
		}
		m := s.db.Metrics()
		if m.Flush.NumInProgress == 0 && m.Compact.NumInProgress == 0 {
			idle++
		} else {
			idle = 0
		}
	}
}

// copyTree copies the directory tree src to dst, file by file, as the
// files are now: what a killed process leaves on a disk that keeps
// running.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			_ = out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}
