package pebble

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// openMemT opens a store at dir on fs and closes it at the end of the test
// (unless the test closed it already).
func openMemT(t *testing.T, fs *MemFS, dir string, o Options) *Store {
	t.Helper()
	o.FS, o.Dir, o.Layout = fs, dir, testLayout
	o.CacheBytes, o.MemTableBytes = 8<<20, 4<<20
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open(%s on a MemFS): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// putBatch fills a batch of n keys "b<i>/<j>" = "v<i>/<j>".
func putBatch(b *Batch, i, n int) {
	for j := range n {
		b.Set(fmt.Appendf(nil, "b%03d/%03d", i, j), fmt.Appendf(nil, "v%d/%d", i, j))
	}
}

// batchKeys counts the keys of batch i present in r.
func batchKeys(t *testing.T, r Reader, i, n int) int {
	t.Helper()
	found := 0
	for j := range n {
		key := fmt.Sprintf("b%03d/%03d", i, j)
		if v, ok := mustGet(t, r, key); ok {
			if want := fmt.Sprintf("v%d/%d", i, j); v != want {
				t.Fatalf("Get(%q) = %q, want %q", key, v, want)
			}
			found++
		}
	}
	return found
}

// TestPowerCut commits batches, applies more without waiting for their
// fsync, and cuts the power: every committed batch survives (in a
// directory the store created, whose entry must have been synced too),
// every other batch is all there or not at all, and the store reopens,
// read-only and read-write. With a torn cut, some unsynced blocks survive
// beside zeroed ones, and recovery must still stop at a whole batch.
func TestPowerCut(t *testing.T) {
	for _, keep := range []int{0, 50} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("keep%d/seed%d", keep, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				fs := NewMemFS()
				const dir, perBatch = "/disk/protobase/data", 50
				s := openMemT(t, fs, dir, Options{Sync: true})
				committed := 5 + rng.IntN(20)
				for i := range committed {
					commitT(t, s, func(b *Batch) { putBatch(b, i, perBatch) })
				}
				applied := committed + rng.IntN(5)
				for i := committed; i < applied; i++ {
					b := s.NewBatch()
					b.Stamp(1)
					putBatch(b, i, perBatch)
					if err := s.Apply(b); err != nil {
						t.Fatal(err)
					}
					defer b.Close() // the fsync goes on; the cut below does not wait for it
				}
				var cut *MemFS
				if keep == 0 {
					cut = fs.PowerCut(nil, 0)
				} else {
					cut = fs.PowerCut(rng, keep)
				}

				ro := openMemT(t, cut, dir, Options{ReadOnly: true})
				checkCut(t, ro, committed, applied, perBatch)
				if err := ro.Close(); err != nil {
					t.Fatal(err)
				}
				rw := openMemT(t, cut, dir, Options{Sync: true})
				checkCut(t, rw, committed, applied, perBatch)
				commitT(t, rw, func(b *Batch) { putBatch(b, applied, perBatch) })
			})
		}
	}
}

func checkCut(t *testing.T, r Reader, committed, applied, perBatch int) {
	t.Helper()
	for i := range committed {
		if n := batchKeys(t, r, i, perBatch); n != perBatch {
			t.Fatalf("committed batch %d: %d of %d keys after the power cut", i, n, perBatch)
		}
	}
	gone := false // recovery replays a prefix of the log
	for i := committed; i < applied; i++ {
		switch n := batchKeys(t, r, i, perBatch); {
		case n == 0:
			gone = true
		case n != perBatch:
			t.Fatalf("unacknowledged batch %d: %d of %d keys, want all or none", i, n, perBatch)
		case gone:
			t.Fatalf("unacknowledged batch %d survived an earlier one that did not", i)
		}
	}
}

// TestPowerCutDropsUnsynced shows the MemFS is strict: with Sync off
// nothing fsyncs the log, so a committed batch is lost at a power cut
// (while a clean Close would have kept it).
func TestPowerCutDropsUnsynced(t *testing.T) {
	fs := NewMemFS()
	s := openMemT(t, fs, "/data", Options{Sync: false})
	commitT(t, s, func(b *Batch) { putBatch(b, 0, 10) })
	wantValue(t, s, "b000/000", "v0/0")
	cut := fs.PowerCut(nil, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantMissing(t, openMemT(t, cut, "/data", Options{}), "b000/000")
	wantValue(t, openMemT(t, fs, "/data", Options{}), "b000/000", "v0/0")
}

// TestMemFSClaims checks a directory is claimed per filesystem: the same
// path on two MemFS is two stores, twice on one is ErrLocked.
func TestMemFSClaims(t *testing.T) {
	a, b := NewMemFS(), NewMemFS()
	openMemT(t, a, "/data", Options{})
	openMemT(t, b, "/data", Options{})
	if s, err := Open(Options{FS: a, Dir: "/data", Layout: testLayout}); !errors.Is(err, ErrLocked) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("second Open of /data on one MemFS: %v, want ErrLocked", err)
	}
}
