package engine_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/pebble"
)

// blobProto is a type without indexes whose records are as large as a
// test makes them.
const blobProto = `syntax = "proto3";
package blob;
import "protobase/v1/options.proto";

message Blob {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  bytes data = 2;
}
`

// blobEngine is watchEngine with blobProto beside shopProto.
func blobEngine(t *testing.T, opts engine.Options) *testEngine {
	t.Helper()
	te := watchEngine(t, opts)
	te.apply(map[string]string{"shop.proto": shopProto, "blob.proto": blobProto})
	return te
}

// blob is a blob.Blob record of id holding n random bytes.
func blob(id int64, n int, seed uint64) *anypb.Any {
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, uint64(id)))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, data)
	return &anypb.Any{TypeUrl: "type.googleapis.com/blob.Blob", Value: b}
}

func blobs(from, n, size int, seed uint64) []*anypb.Any {
	out := make([]*anypb.Any, n)
	for i := range out {
		out[i] = blob(int64(from+i), size, seed)
	}
	return out
}

// logValues returns the largest key and value the change log stores, and
// how many keys it has.
func (te *testEngine) logValues() (largest, keys int) {
	te.t.Helper()
	it, err := te.st.NewIterator([]byte(keyspace.LogPrefix), keyspace.PrefixEnd([]byte(keyspace.LogPrefix)))
	if err != nil {
		te.t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		largest = max(largest, len(it.Value()))
		keys++
	}
	if err := it.Error(); err != nil {
		te.t.Fatal(err)
	}
	return largest, keys
}

// wantChanges checks that changes are the records of recs in order, from
// commit c, change index first on.
func wantChanges(t *testing.T, changes []*pb.Change, c uint64, first int, recs, olds []*anypb.Any) {
	t.Helper()
	if len(changes) < len(recs) {
		t.Fatalf("%d changes, want %d", len(changes), len(recs))
	}
	for i, rec := range recs {
		ch := changes[i]
		if ch.GetPosition().GetCommit() != c || ch.GetPosition().GetIndex() != uint32(first+i) {
			t.Fatalf("change %d at %v, want {commit %d, index %d}", i, ch.GetPosition(), c, first+i)
		}
		if !bytes.Equal(ch.GetRecord().GetValue(), rec.Value) {
			t.Fatalf("change %d of commit %d: record of %d bytes differs from the one written (%d bytes)",
				i, c, len(ch.GetRecord().GetValue()), len(rec.Value))
		}
		if olds != nil && !bytes.Equal(ch.GetOldRecord().GetValue(), olds[i].Value) {
			t.Fatalf("change %d of commit %d: old record differs from the one replaced", i, c)
		}
	}
}

// TestWatchLogParts writes a batch of 80 MiB and an update of a 3 MiB
// record: the log stores no value over its bound (a damaged value costs
// Pebble a search that grows with its block, which nothing interrupts),
// and watchers read the entries whole, from storage, from a position
// inside one, after a restart, and beside a watcher sharing them.
func TestWatchLogParts(t *testing.T) {
	te := blobEngine(t, engine.Options{})
	big := blobs(1, 80, 1<<20, 1)
	te.mustWrite(engine.OpInsert, big)              // commit 1
	te.mustWrite(engine.OpInsert, users(te, 1, 3))  // commit 2
	olds := []*anypb.Any{blob(1000, 3<<20, 2)}      // commit 3
	te.mustWrite(engine.OpInsert, olds)             //
	news := []*anypb.Any{blob(1000, 3<<20, 3)}      // commit 4
	te.mustWrite(engine.OpUpdate, news)             //
	mid := blobs(2000, 10, 100<<10, 4)              // commit 5: 1 MB, shared below
	te.mustWrite(engine.OpInsert, mid)              //
	te.mustWrite(engine.OpInsert, users(te, 10, 2)) // commit 6
	if largest, keys := te.logValues(); largest > engine.LogPartBytes || keys < 320 {
		t.Fatalf("the log stores a value of %d bytes in %d keys; want none over %d", largest, keys, engine.LogPartBytes)
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
		if rep := te.mustCheck(); rep.LogEntries != 6 {
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
	done := te.e.HoldWatchShare(req)
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
	te.mustWrite(engine.OpInsert, olds)
	news := blobs(1, 3, 200<<10, 6)
	te.mustWrite(engine.OpUpdate, news)
	te.mustWrite(engine.OpInsert, users(te, 1, 2))
	te.close()
	st, err := pebble.Open(pebble.Options{Dir: te.dir, Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	for c := uint64(1); c <= 2; c++ {
		if err := engine.RewriteLogEntryV1(st, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	te = openEngine(t, te.dir, engine.Options{WatchRetention: time.Hour, WatchTrimInterval: time.Hour})
	if largest, _ := te.logValues(); largest < 900<<10 {
		t.Fatalf("the largest log value is %d bytes: the entries were not rewritten as one value each", largest)
	}
	r := te.watchUntil(&pb.WatchRequest{Types: []string{"blob.Blob"}, Start: oldest(), OldRecords: true}, 6)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantChanges(t, r.changes, 1, 0, olds, nil)
	wantChanges(t, r.changes[3:], 2, 0, news, olds)
	te.mustCheck()
	// New entries beside them are stored in parts.
	te.mustWrite(engine.OpInsert, blobs(10, 1, 600<<10, 7))
	r = te.watchUntil(&pb.WatchRequest{Types: []string{"blob.Blob"}, Start: startAfter(3)}, 1)
	if r.err != nil || len(r.changes) != 1 || len(r.changes[0].GetRecord().GetValue()) < 600<<10 {
		t.Fatalf("the entry after the old ones: %v", r.err)
	}
}

// TestWatchCancelStopsReading cancels a watch as soon as it starts, with
// a log whose only matching changes are in its last entry: the watch ends
// without reading on to them. (A watcher reading a long stretch of the
// log that its filter does not match sends nothing: only its context,
// checked between entries, can stop it.)
func TestWatchCancelStopsReading(t *testing.T) {
	te := watchEngine(t, engine.Options{WatchTailBytes: -1})
	w := te.e.NewWriter()
	defer w.Close()
	for i := range 300 {
		if err := w.Apply(t.Context(), engine.OpInsert, users(te, 10*i, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var changes int
	err := te.e.Watch(ctx, &pb.WatchRequest{Types: []string{"shop.User"}, Start: oldest(), Filter: "id >= 2990"},
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

// TestCheckChangeLog damages the change log three ways; Check names each.
func TestCheckChangeLog(t *testing.T) {
	te := blobEngine(t, engine.Options{})
	for i := range 4 {
		te.mustWrite(engine.OpInsert, users(te, 10*i, 3))
	}
	te.mustWrite(engine.OpInsert, blobs(1, 1, 600<<10, 8)) // commit 5, in 3 parts
	te.mustWrite(engine.OpInsert, users(te, 100, 3))
	if r := te.mustCheck(); r.LogEntries != 6 {
		t.Fatalf("check read %d change-log entries, want 6", r.LogEntries)
	}
	for _, c := range []struct {
		name string
		harm func(b store.WriteBatch)
		want engine.ProblemKind
	}{
		{"a malformed entry", func(b store.WriteBatch) {
			b.Set(keyspace.AppendLogKey(nil, 2), []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9, 0x7f})
		}, engine.ProblemBadLogEntry},
		{"a missing part", func(b store.WriteBatch) {
			b.Delete(keyspace.AppendLogPartKey(nil, 5, 1))
		}, engine.ProblemBadLogEntry},
		{"a missing entry", func(b store.WriteBatch) {
			b.Delete(keyspace.AppendLogKey(nil, 3))
		}, engine.ProblemLogGap},
	} {
		b := te.st.NewWriteBatch()
		c.harm(b)
		if err := te.st.ApplyBatch(b); err != nil {
			t.Fatal(err)
		}
		b.Close()
		r, err := engine.Check(t.Context(), te.st)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		found := false
		for _, p := range r.Problems {
			found = found || p.Kind == c.want
		}
		if !found {
			t.Fatalf("%s: check found %v, want a %s", c.name, r.Problems, c.want)
		}
	}
}
