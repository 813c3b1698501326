package pebble

// Tests of a store's life: reopening, durability with and without sync,
// read-only opening, and calls after or during Close.

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
)

func TestReopenKeepsData(t *testing.T) {
	for _, syncWrites := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", syncWrites), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "nested", "db") // Open creates it
			s, err := Open(Options{Dir: dir, Layout: testLayout, Sync: syncWrites})
			if err != nil {
				t.Fatal(err)
			}
			b := s.NewBatch()
			b.Stamp(1)
			for i := range 1000 {
				b.Set(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "v%d", i))
			}
			if err := s.Commit(b); err != nil {
				t.Fatal(err)
			}
			b.Close()
			if err := s.Flush(); err != nil { // some data in sstables...
				t.Fatal(err)
			}
			b = s.NewBatch()
			b.Stamp(1)
			b.DeleteRange([]byte("k0100"), []byte("k0200"))
			b.Delete([]byte("k0500"))
			b.Set([]byte("k0999"), []byte("last")) // ...and some only in the WAL
			if err := s.Commit(b); err != nil {
				t.Fatal(err)
			}
			b.Close()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			s = openT(t, dir, syncWrites)
			wantValue(t, s, "k0000", "v0")
			wantMissing(t, s, "k0150")
			wantMissing(t, s, "k0500")
			wantValue(t, s, "k0200", "v200")
			wantValue(t, s, "k0999", "last")
			if n := len(scan(t, s, "", "", false)); n != 1000-100-1 {
				t.Fatalf("%d keys after reopen, want %d", n, 899)
			}
		})
	}
}

// TestConcurrentApplyWaitDurable mirrors the engine's commit path: each
// writer applies under a shared lock, releases it, then waits for the fsync.
// All acknowledged batches must survive a reopen.
func TestConcurrentApplyWaitDurable(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Layout: testLayout, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	const writers, batches, perBatch = 8, 50, 10
	var lock sync.Mutex
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := s.NewBatch()
			b.Stamp(1)
			defer b.Close()
			for i := range batches {
				b.Reset()
				for j := range perBatch {
					b.Set(fmt.Appendf(nil, "w%d/%03d/%d", w, i, j), fmt.Appendf(nil, "%d", i*perBatch+j))
				}
				lock.Lock()
				err := s.Apply(b)
				lock.Unlock()
				if err == nil {
					err = b.Wait()
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openT(t, dir, true)
	for w := range writers {
		for i := range batches {
			for j := range perBatch {
				wantValue(t, s, fmt.Sprintf("w%d/%03d/%d", w, i, j), fmt.Sprint(i*perBatch+j))
			}
		}
	}
	if n := len(scan(t, s, "", "", false)); n != writers*batches*perBatch {
		t.Fatalf("%d keys after reopen, want %d", n, writers*batches*perBatch)
	}
}

func TestSyncFalse(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Layout: testLayout, Sync: false})
	if err != nil {
		t.Fatal(err)
	}
	if s.SyncWrites() {
		t.Fatal("SyncWrites() = true")
	}
	b := s.NewBatch()
	b.Stamp(1)
	b.Set([]byte("k"), []byte("v"))
	if err := s.Apply(b); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, "k", "v")
	if err := b.Wait(); err != nil { // returns at once
		t.Fatal(err)
	}
	b.Close()
	if err := s.Close(); err != nil { // a clean close syncs the WAL
		t.Fatal(err)
	}
	s = openT(t, dir, false)
	wantValue(t, s, "k", "v")
}

func TestReadOnly(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "does-not-exist")
	if _, err := Open(Options{Dir: missing, Layout: testLayout, ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open read-only missing dir = %v, want fs.ErrNotExist", err)
	}
	if _, err := Open(Options{Dir: t.TempDir(), Layout: testLayout, ReadOnly: true}); err == nil {
		t.Fatal("Open read-only on an empty dir succeeded")
	}
	if _, err := Open(Options{Layout: testLayout}); err == nil {
		t.Fatal("Open with empty Dir succeeded")
	}

	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Layout: testLayout, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	commitT(t, s, func(b *Batch) { b.Set([]byte("k"), []byte("v")) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := Open(Options{Dir: dir, Layout: testLayout, ReadOnly: true, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	wantValue(t, ro, "k", "v")
	b := ro.NewBatch()
	b.Stamp(1)
	defer b.Close()
	b.Set([]byte("k2"), nil)
	if err := ro.Commit(b); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Commit on read-only = %v, want ErrReadOnly", err)
	}
	if err := ro.Flush(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Flush on read-only = %v, want ErrReadOnly", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Layout: testLayout, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	commitT(t, s, func(b *Batch) { b.Set([]byte("k"), []byte("v")) })
	snap := s.NewSnapshot()
	snap.Close()
	b := s.NewBatch()
	b.Stamp(1)
	defer b.Close()
	b.Set([]byte("k2"), nil)
	// A batch applied but not yet waited for when the store closes: Close
	// syncs the WAL, and the late Wait neither hangs nor panics.
	pending := s.NewBatch()
	pending.Stamp(1)
	pending.Set([]byte("k3"), []byte("v3"))
	if err := s.Apply(pending); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pending.Wait(); err != nil {
		t.Errorf("Wait after Close = %v", err)
	}
	pending.Close()

	if _, _, err := s.Get([]byte("k"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	if _, err := s.NewIter(nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("NewIter after Close = %v, want ErrClosed", err)
	}
	sn := s.NewSnapshot()
	if _, _, err := sn.Get([]byte("k"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Snapshot.Get after Close = %v, want ErrClosed", err)
	}
	if _, err := sn.NewIter(nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Snapshot.NewIter after Close = %v, want ErrClosed", err)
	}
	if err := sn.Close(); err != nil {
		t.Errorf("Snapshot.Close after Close = %v", err)
	}
	if err := s.Commit(b); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit after Close = %v, want ErrClosed", err)
	}
	if err := s.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close = %v, want ErrClosed", err)
	}
	if _, err := s.EstimateSize(nil, []byte("z")); !errors.Is(err, ErrClosed) {
		t.Errorf("EstimateSize after Close = %v, want ErrClosed", err)
	}
	if m := s.Metrics(); m != (Metrics{}) {
		t.Errorf("Metrics after Close = %+v, want zero", m)
	}
	if s.DebugString() != "" {
		t.Error("DebugString after Close is not empty")
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}

	s = openT(t, dir, true)
	wantValue(t, s, "k3", "v3")
}

// TestCloseDuringReads closes the store while other goroutines read: they
// must see either data or ErrClosed, never a panic.
func TestCloseDuringReads(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), Layout: testLayout, Sync: false})
	if err != nil {
		t.Fatal(err)
	}
	commitT(t, s, func(b *Batch) { b.Set([]byte("k"), []byte("v")) })
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for {
				var err error
				buf, _, err = s.Get([]byte("k"), buf)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}
