package server_test

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

// The footprint bounds of docs/operations.md ("Disk use"), in bytes as du
// counts them.
const (
	emptyStoreBound   = 16_000_000
	smallRecordsBound = 64_000_000
	// walStep is the unit in which a log file reserves its space.
	walStep = 1 << 20
	// fsSlack is what a filesystem may add to a file's blocks for its own
	// bookkeeping (ext4 counts the blocks of a file's extent tree).
	fsSlack = 64 << 10
)

// allocated returns the bytes the filesystem allocated to the file or
// directory fi describes: what du counts, preallocated space included.
func allocated(t *testing.T, path string, fi fs.FileInfo) int64 {
	t.Helper()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("%s: no stat of its blocks", path)
	}
	return st.Blocks * 512
}

// diskUsage returns du's count for dir, and checks each write-ahead log
// file against the documented reservation: at most twice its bytes
// rounded up to whole MiB (1 MiB at least), and the filesystem's own.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n := allocated(t, path, fi)
		total += n
		if strings.HasSuffix(path, ".log") {
			if bound := max(roundUpTo(2*fi.Size(), walStep), walStep) + fsSlack; n > bound {
				t.Errorf("%s: %d bytes on disk for %d written, want at most %d", path, n, fi.Size(), bound)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

func roundUpTo(n, step int64) int64 { return (n + step - 1) / step * step }

// A data directory stays within the footprint docs/operations.md gives:
// an empty store within 16 MB, one of 50,000 small records (about 6 MB)
// within 64 MB, whether served or after a restart, with the largest
// memtables the server picks (their size set the write-ahead log's
// preallocation).
func TestDiskFootprint(t *testing.T) {
	skipLargeInRaceRun(t)
	ts := startServer(t, server.Config{MemTableBytes: pebble.MaxMemTableBytes})
	dir := ts.Cfg.DataDir
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	n := diskUsage(t, dir)
	t.Logf("empty store: %d bytes on disk", n)
	if n > emptyStoreBound {
		t.Errorf("an empty store takes %d bytes on disk, want at most %d", n, emptyStoreBound)
	}

	const records, perBatch = 50_000, 1000
	var batches [][]*anypb.Any
	var data int
	for i := range records / perBatch {
		batch := make([]*anypb.Any, perBatch)
		for j := range batch {
			id := i*perBatch + j + 1
			batch[j] = ts.Rec("shop.User", fmt.Sprintf(
				`{"id": %d, "name": "user number %06d, a customer since 2024", "email": "user%06d@example.com", "tags": ["customer", "newsletter", "loyalty-programme", "region-%d"]}`,
				id, id, id, id%20))
			data += len(batch[j].GetValue())
		}
		batches = append(batches, batch)
	}
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, batches...)
	n = diskUsage(t, dir)
	t.Logf("%d records (%d bytes): %d bytes on disk", records, data, n)
	if n > smallRecordsBound {
		t.Errorf("%d small records (%d bytes) take %d bytes on disk, want at most %d", records, data, n, smallRecordsBound)
	}

	ts = ts.restart()
	if n := ts.Count("shop.User"); n != records {
		t.Fatalf("%d records after a restart, want %d", n, records)
	}
	n = diskUsage(t, dir)
	t.Logf("after a restart: %d bytes on disk", n)
	if n > smallRecordsBound {
		t.Errorf("%d small records take %d bytes on disk after a restart, want at most %d", records, n, smallRecordsBound)
	}
}
