package watch_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
)

// TestWatchTrimByTime checks that entries older than the retention go,
// and that a start before them is OUT_OF_RANGE naming the oldest kept.
// The log's age is real time (the log's clock), so the test waits the retention.
func TestWatchTrimByTime(t *testing.T) {
	const retention = 2 * time.Second
	te := watchEngine(t, engine.Options{WatchRetention: retention})
	for i := range 5 {
		te.MustWrite(engine.OpInsert, users(te, i*10, 10))
	}
	if err := te.E.ChangeLog().Trim(); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	if r := te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: startAfter(0)}, 50); len(r.changes) != 50 || r.err != nil {
		t.Fatalf("nothing old enough to trim: %d changes, %v", len(r.changes), r.err)
	}
	// The log's time runs at least 0.99 × real time.
	time.Sleep(time.Until(written.Add(retention + retention/50)))
	if err := te.E.ChangeLog().Trim(); err != nil {
		t.Fatal(err)
	}
	r := te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: startAfter(0)}, 1)
	if codeOf(r.err) != apierror.OutOfRange || !strings.Contains(r.err.Error(), "oldest position available is commit 5 ") {
		t.Fatalf("start before the trimmed log: %v, want OUT_OF_RANGE naming commit 5", r.err)
	}
	// The log is empty: oldest is now, and new changes come through.
	te.MustWrite(engine.OpInsert, users(te, 100, 1))
	r = te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: oldest()}, 1)
	if len(r.changes) != 1 || r.changes[0].Position.GetCommit() != 6 || r.progress[0].GetCommit() != 5 {
		t.Fatalf("after trimming all: %v %v %v", r.changes, r.progress, r.err)
	}
}

// TestWatchTrimByBytes checks the byte bound: the newest entries within
// it stay, the older go, across a restart (the byte count is rebuilt).
func TestWatchTrimByBytes(t *testing.T) {
	te := watchEngine(t, engine.Options{WatchRetentionBytes: 2000})
	for i := range 10 {
		te.MustWrite(engine.OpInsert, users(te, i*10, 10)) // ~190 bytes an entry
	}
	te = te.reopen()
	for i := 10; i < 20; i++ {
		te.MustWrite(engine.OpInsert, users(te, i*10, 10))
	}
	if err := te.E.ChangeLog().Trim(); err != nil {
		t.Fatal(err)
	}
	r := te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: oldest()}, -1)
	first := r.progress[0].GetCommit()
	if first < 10 || first > 18 {
		t.Fatalf("oldest after trimming to 2000 bytes = %d, want between 10 and 18 of 20 commits", first)
	}
	r = te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: oldest()}, int(20-first)*10)
	if r.err != nil || r.changes[0].Position.GetCommit() != first+1 {
		t.Fatalf("watch from oldest: %v, first change %v", r.err, r.changes)
	}
	if r := te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: startAfter(first - 1)}, 1); codeOf(r.err) != apierror.OutOfRange {
		t.Fatalf("start one before the oldest: %v, want OUT_OF_RANGE", r.err)
	}
}

// TestWatchSyncsQuietWriter checks that a batch whose writer never waits
// for its sync still reaches a watcher (the watcher syncs it).
func TestWatchSyncsQuietWriter(t *testing.T) {
	te := watchEngine(t, engine.Options{})
	w := te.E.NewWriter()
	defer w.Close()
	done := make(chan watchResult)
	go func() { done <- te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}}, 1) }()
	// Apply without Sync: nothing on the writer's side waits for the WAL.
	if err := w.Apply(context.Background(), engine.Batch{Op: engine.OpInsert, Records: users(te, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if len(r.changes) != 1 || r.err != nil {
		t.Fatalf("watch = %v, %v", r.changes, r.err)
	}
}

// TestWatchStop checks that Stop ends a waiting watch.
func TestWatchStop(t *testing.T) {
	te := watchEngine(t, engine.Options{})
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- te.w.Watch(context.Background(), &pb.WatchRequest{Types: []string{"shop.User"}}, releasing(func(*[]byte) error {
			close(started)
			return nil
		}))
	}()
	<-started
	te.w.Stop()
	if err := <-done; codeOf(err) != apierror.Unavailable {
		t.Fatalf("stopped watch: %v, want UNAVAILABLE", err)
	}
}

// TestWatchLogOff checks that without retention Watch says how to turn
// the log on, and that writes leave no entries behind.
func TestWatchLogOff(t *testing.T) {
	te := newEngine(t)
	te.MustWrite(engine.OpInsert, users(te, 1, 3))
	r := te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}}, 1)
	if codeOf(r.err) != apierror.FailedPrecondition || !strings.Contains(r.err.Error(), "--watch-retention") {
		t.Fatalf("log off: %v", r.err)
	}
	te.Opts.WatchRetention = time.Hour
	te = te.reopen()
	r = te.watchUntil(&pb.WatchRequest{Types: []string{"shop.User"}, Start: oldest()}, -1)
	if r.progress[0].GetCommit() != 1 {
		t.Fatalf("first watch with the log on: oldest = %v, want commit 1 (no entries)", r.progress[0])
	}
}

// Watchers asking for the same changes share their encoding: the one
// that reads an entry first publishes it, the others copy it. Each still
// batches on its own, and gets the very bytes it would alone.
func TestWatchShared(t *testing.T) {
	te := watchEngine(t, engine.Options{})
	w := te.E.NewWriter()
	defer w.Close()
	for i := range 5 {
		if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: users(te, 1+7*i, 7)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpUpsert, Records: users(te, 3, 10)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpRemove, Records: users(te, 20, 6)}); err != nil {
		t.Fatal(err)
	}
	last, err := w.Sync()
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []*pb.WatchRequest{
		{Types: []string{"shop.User"}, Start: oldest(), OldRecords: true, BatchSize: 4},
		{Types: []string{"shop.User", "shop.Member"}, Start: oldest(), Filter: "id > 5 AND id < 30", BatchSize: 5},
	} {
		before := te.w.SharedEntries()
		alone := te.watchRaw(req, last)
		if n := te.w.SharedEntries(); n != before {
			t.Fatalf("a watcher alone kept %d shared entries", n-before)
		}
		done := te.w.HoldShare(req)
		filled := te.watchRaw(req, last)
		if te.w.SharedEntries() == before {
			t.Fatal("a watcher beside another kept no shared entry")
		}
		copied := te.watchRaw(req, last)
		done()
		for name, got := range map[string][][]byte{"filling": filled, "copying": copied} {
			if len(got) != len(alone) {
				t.Fatalf("%s watcher got %d messages, alone %d", name, len(got), len(alone))
			}
			for i := range got {
				if !bytes.Equal(got[i], alone[i]) {
					t.Fatalf("%s watcher's message %d differs from a watcher's alone", name, i)
				}
			}
		}
	}
}
