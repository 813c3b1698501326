package watch_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/pebble"
)

// TestWatchLogParts writes a batch of 80 MiB and an update of a 3 MiB
// record: the log stores no value over its bound (a damaged value costs
// Pebble a search that grows with its block, which nothing interrupts),
// and watchers read the entries whole, from storage, from a position
// inside one, after a restart, and beside a watcher sharing them.
func TestWatchLogParts(t *testing.T) {
	te := blobEngine(t, engine.Options{})
	big := blobs(1, 80, 1<<20, 1)
	te.MustWrite(engine.OpInsert, big)              // commit 1
	te.MustWrite(engine.OpInsert, users(te, 1, 3))  // commit 2
	olds := []*anypb.Any{blob(1000, 3<<20, 2)}      // commit 3
	te.MustWrite(engine.OpInsert, olds)             //
	news := []*anypb.Any{blob(1000, 3<<20, 3)}      // commit 4
	te.MustWrite(engine.OpUpdate, news)             //
	mid := blobs(2000, 10, 100<<10, 4)              // commit 5: 1 MB, shared below
	te.MustWrite(engine.OpInsert, mid)              //
	te.MustWrite(engine.OpInsert, users(te, 10, 2)) // commit 6
	if largest, keys := te.logValues(); largest > changelog.PartBytes || keys < 320 {
		t.Fatalf("the log stores a value of %d bytes in %d keys; want none over %d", largest, keys, changelog.PartBytes)
	}

	check := func(te *testEngine) {
		t.Helper()
		r := te.watchUntil(&pb.WatchRequest{Types: []string{"blob.Blob", "shop.User"}, Start: oldest(), OldRecords: true}, 80+3+1+1+10+2)
		if r.err != nil {
			t.Fatal(r.err)
		}
		wantChanges(t, r.changes, 1, 0, big, nil)
		wantChanges(t, r.changes[83:], 3, 0, olds, nil)
		wantChanges(t, r.changes[84:], 4, 0, news, olds)
		wantChanges(t, r.changes[85:], 5, 0, mid, nil)
		// From inside the entry of commit 1.
		r = te.watchUntil(&pb.WatchRequest{Types: []string{"blob.Blob"},
			Start: &pb.WatchStart{Start: &pb.WatchStart_After{After: &pb.Position{Commit: 1, Index: proto.Uint32(41)}}}}, 38)
		if r.err != nil {
			t.Fatal(r.err)
		}
		wantChanges(t, r.changes, 1, 42, big[42:], nil)
		if rep := te.MustCheck(); rep.LogEntries != 6 {
			t.Fatalf("check read %d change-log entries, want 6", rep.LogEntries)
		}
	}
	check(te)
	te = te.reopen()
	check(te)

	// Two watchers asking for the same changes: the second copies the
	// first one's encoding of commit 5 and skips its parts unread.
	req := &pb.WatchRequest{Types: []string{"blob.Blob", "shop.User"}, Start: startAfter(4), BatchSize: 3}
	alone := te.watchRaw(req, 6)
	done := te.w.HoldShare(req)
	filled := te.watchRaw(req, 6)
	copied := te.watchRaw(req, 6)
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

// TestWatchLogOldFormat reads a store whose large entry is one value, as
// stores written before entries were stored in parts hold them.
func TestWatchLogOldFormat(t *testing.T) {
	te := blobEngine(t, engine.Options{})
	olds := blobs(1, 3, 300<<10, 5)
	te.MustWrite(engine.OpInsert, olds)
	news := blobs(1, 3, 200<<10, 6)
	te.MustWrite(engine.OpUpdate, news)
	te.MustWrite(engine.OpInsert, users(te, 1, 2))
	id := te.E.Schema().Types["blob.Blob"].ID
	te.Close()
	st, err := pebble.Open(pebble.Options{Dir: te.Dir, Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	storeV1(t, st, 1, pb.ChangeOp_CHANGE_OP_INSERT, id, olds, nil)
	storeV1(t, st, 2, pb.ChangeOp_CHANGE_OP_UPDATE, id, news, olds)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	te = openEngine(t, te.Dir, engine.Options{WatchRetention: time.Hour, WatchTrimInterval: time.Hour})
	if largest, _ := te.logValues(); largest < 900<<10 {
		t.Fatalf("the largest log value is %d bytes: the entries were not rewritten as one value each", largest)
	}
	r := te.watchUntil(&pb.WatchRequest{Types: []string{"blob.Blob"}, Start: oldest(), OldRecords: true}, 6)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantChanges(t, r.changes, 1, 0, olds, nil)
	wantChanges(t, r.changes[3:], 2, 0, news, olds)
	te.MustCheck()
	// New entries beside them are stored in parts.
	te.MustWrite(engine.OpInsert, blobs(10, 1, 600<<10, 7))
	r = te.watchUntil(&pb.WatchRequest{Types: []string{"blob.Blob"}, Start: startAfter(3)}, 1)
	if r.err != nil || len(r.changes) != 1 || len(r.changes[0].GetRecord().GetValue()) < 600<<10 {
		t.Fatalf("the entry after the old ones: %v", r.err)
	}
}

// storeV1 stores the entry of commit c again as one value, the way stores
// written before entries were stored in parts hold every entry (version 1
// in internal/changelog's package comment): under the commit's key, the
// header with the stored entry's time and log bytes, then each change of
// the batch: op, type id, the new record and the old one.
func storeV1(t *testing.T, st store.KV, c uint64, op pb.ChangeOp, typeID uint32, recs, olds []*anypb.Any) {
	t.Helper()
	k := keyspace.AppendLogKey(nil, c)
	cur, found, err := st.Get(k, nil)
	if err != nil || !found || len(cur) < 17 {
		t.Fatalf("the entry of commit %d: %d bytes, %v, %v", c, len(cur), found, err)
	}
	v := append([]byte{1}, cur[1:17]...)
	for i, rec := range recs {
		var old []byte
		if olds != nil {
			old = olds[i].Value
		}
		v = append(v, byte(op))
		v = protowire.AppendVarint(v, uint64(typeID))
		v = protowire.AppendBytes(v, rec.Value)
		v = protowire.AppendBytes(v, old)
	}
	b := st.NewWriteBatch()
	defer b.Close()
	b.DeleteRange(k, keyspace.AppendLogKey(nil, c+1))
	b.Set(k, v)
	if err := st.ApplyBatch(b); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestWatchCancelStopsReading cancels a watch as soon as it starts, with
// a log whose only matching changes are in its last entry: the watch ends
// without reading on to them. (A watcher reading a long stretch of the
// log that its filter does not match sends nothing: only its context,
// checked between entries, can stop it.)
func TestWatchCancelStopsReading(t *testing.T) {
	te := watchEngine(t, engine.Options{WatchTailBytes: -1})
	w := te.E.NewWriter()
	defer w.Close()
	for i := range 300 {
		if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: users(te, 10*i, 10)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var changes int
	err := te.w.Watch(ctx, &pb.WatchRequest{Types: []string{"shop.User"}, Start: oldest(), Filter: "id >= 2990"},
		releasing(func(bp *[]byte) error {
			m := new(pb.WatchResponse)
			if err := proto.Unmarshal(*bp, m); err != nil {
				return err
			}
			changes += len(m.Changes)
			cancel() // the client goes after the first message
			return nil
		}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v, want its context's cancellation", err)
	}
	if changes != 0 {
		t.Fatalf("the watch read on to the last entry after its cancellation (sent %d changes)", changes)
	}
}
