package engine_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/engine"
)

// A replay of a log holding the reaper's expiries, updates, inserts and an
// insert over an expired record brings a checkpoint to the source's records, with its indexes whole and
// every batch at its original position, though the wall clock jumped
// forward; a replay not starting after the store's last commit is
// refused.
func TestReplayExpiries(t *testing.T) {
	var now, replayNow atomic.Int64
	now.Store(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	// The log's clock follows the same wall clock but keeps its pace
	// when it jumps: entry times lag the expiries the reaper judged.
	srcOpts := engine.Options{WatchRetention: time.Hour, ReapInterval: -1, Now: clock, Clock: clock}
	src := openEngine(t, t.TempDir(), srcOpts)
	src.Apply(map[string]string{"tt.proto": expiryProto})
	exp := func(ms int64) int64 { return now.Load()/1e6 + ms }
	var recs []*anypb.Any
	for id := range 20 {
		recs = append(recs, src.Rec("tt.Token", fmt.Sprintf(`{"id": %d, "exp_ms": %d, "score": %d}`, id, exp(int64(1000+id%2*9000)), id)))
	}
	src.MustWrite(engine.OpInsert, recs)
	base := filepath.Join(t.TempDir(), "base")
	pt, err := src.E.Checkpoint(base)
	if err != nil {
		t.Fatal(err)
	}

	now.Add(int64(2 * time.Second)) // the even ids expire
	if n, err := src.E.Reap(t.Context()); err != nil || n != 10 {
		t.Fatalf("reaped %d, %v; want 10", n, err)
	}
	src.MustWrite(engine.OpUpdate, []*anypb.Any{
		src.Rec("tt.Token", fmt.Sprintf(`{"id": 1, "exp_ms": %d, "score": 100}`, exp(500))),
		src.Rec("tt.Token", fmt.Sprintf(`{"id": 3, "exp_ms": %d, "score": 300}`, exp(500))),
	})
	src.MustWrite(engine.OpInsert, []*anypb.Any{src.Rec("tt.Token", fmt.Sprintf(`{"id": 2, "exp_ms": %d, "score": 7}`, exp(60000)))})
	now.Add(int64(time.Second)) // ids 1 and 3 expire: reads hide them, the reaper has not run
	// An insert of id 3 deletes the expired record first, as the reaper
	// does: the log holds that expiry, then the insert.
	src.MustWrite(engine.OpInsert, []*anypb.Any{src.Rec("tt.Token", fmt.Sprintf(`{"id": 3, "exp_ms": %d, "score": 8}`, exp(60000)))})
	last := src.E.ChangeLog().Durable().Value()
	want := src.stored("tt.Token")

	replayNow.Store(now.Load())
	dst := openEngine(t, base, engine.Options{WatchRetention: time.Hour, ReapInterval: -1,
		Now: func() time.Time { return time.Unix(0, replayNow.Load()) }})
	if _, err := dst.E.Replay(t.Context(), src.E.ChangeLog(), engine.ReplaySpan{From: pt.Position, To: last}); err == nil {
		t.Fatal("a replay from the store's last commit was not refused")
	}
	done, err := dst.E.Replay(t.Context(), src.E.ChangeLog(), engine.ReplaySpan{From: pt.Position + 1, To: last, At: replayNow.Store})
	if err != nil {
		t.Fatal(err)
	}
	if done.Position != last || done.Entries != int(last-pt.Position) || done.Changes != 15 {
		t.Fatalf("replayed %+v, want position %d, %d entries, 15 changes", done, last, last-pt.Position)
	}
	replayNow.Store(now.Load())
	if got := dst.stored("tt.Token"); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("replayed records differ: got %d, want %d", len(got), len(want))
	}
	// Stored records, expired ones included: the reaper's deletions
	// replayed, and id 1 (expired, not reaped) kept.
	if got, want := dst.MustCheck(), src.MustCheck(); got.Records != want.Records || got.Entries != want.Entries {
		t.Fatalf("the replayed store holds %d records and %d index entries, the source %d and %d",
			got.Records, got.Entries, want.Records, want.Entries)
	}
}
