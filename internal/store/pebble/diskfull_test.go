package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// diskFullKeys returns batch i's record key and index entry key.
func diskFullKeys(i int) (rec, ix []byte) {
	id := fmt.Appendf(nil, "%04d", i)
	return keyspace.AppendRecordKey(nil, 1, id), append(keyspace.IndexPrefix(1), id...)
}

// On a full disk the store refuses batches with store.ErrDiskFull and Flush
// returns it rather than wait for space; reads go on; Close returns
// (the index instance's unflushed batches stay in the journal), and the
// store opened again once space is back holds every committed batch.
func TestDiskFullStore(t *testing.T) {
	fs := NewMemFS()
	const dir = "/db"
	s, err := Open(Options{FS: fs, Dir: dir, Layout: testLayout, Sync: true, CacheBytes: 8 << 20, MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const batches = 50
	val := bytes.Repeat([]byte("v"), 1024)
	for i := range batches {
		commitT(t, s, func(b *Batch) {
			rec, ix := diskFullKeys(i)
			b.Set(rec, val)
			b.Set(ix, val)
		})
	}

	fs.SetDiskFull(true)
	if err := s.Flush(); !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("Flush on a full disk: %v, want store.ErrDiskFull", err)
	}
	b := s.NewBatch()
	b.Stamp(1)
	rec, ix := diskFullKeys(batches)
	b.Set(rec, val)
	b.Set(ix, val)
	if err := s.Commit(b); !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("Commit on a full disk: %v, want store.ErrDiskFull", err)
	}
	b.Close()
	if m := s.Metrics(); !m.DiskFull || m.DiskFullRefused != 1 {
		t.Errorf("metrics on a full disk: DiskFull %v, DiskFullRefused %d; want true, 1", m.DiskFull, m.DiskFullRefused)
	}
	rec, ix = diskFullKeys(batches - 1)
	wantValue(t, s, string(rec), string(val))
	wantValue(t, s, string(ix), string(val))

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close on a full disk: %v", err)
		}
	case <-time.After(30 * time.Second):
		fs.SetDiskFull(false) // lets the test end
		t.Fatal("Close on a full disk did not return in 30 s")
	}

	fs.SetDiskFull(false)
	s = openMemT(t, fs, dir, Options{Sync: true})
	for i := range batches {
		rec, ix := diskFullKeys(i)
		wantValue(t, s, string(rec), string(val))
		wantValue(t, s, string(ix), string(val))
	}
	rec, ix = diskFullKeys(batches)
	wantMissing(t, s, string(rec))
	commitT(t, s, func(b *Batch) { b.Set(rec, val); b.Set(ix, val) })
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush once space is back: %v", err)
	}
	if m := s.Metrics(); m.DiskFull {
		t.Error("metrics say the disk is full once space is back")
	}
}

func TestRetryPause(t *testing.T) {
	for n, want := range map[int]time.Duration{1: retryFirst, 2: 2 * retryFirst, 3: 4 * retryFirst, 6: 32 * retryFirst, 7: retryMax, 100: retryMax} {
		if got := retryPause(n); got != want {
			t.Errorf("retryPause(%d) = %v, want %v", n, got, want)
		}
	}
}
