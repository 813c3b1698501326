package watch_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/watch"
)

// TestWatchFitsMessages watches with a message bound of 300 KiB: an update
// whose change with its old record is over it comes without the old
// record, flagged; changes that fit the bound alone but not beside those
// already in a response go in the next one; and no message is over the
// bound, while every change arrives once, in order, with progress that
// never goes back.
func TestWatchFitsMessages(t *testing.T) {
	const room = 300 << 10
	te := blobEngine(t, engine.Options{})
	te.w = watch.New(te.E, watch.Options{MaxSendBytes: room})
	small := blobs(1, 5, 100<<10, 1)
	te.MustWrite(engine.OpInsert, small)                         // commit 1: five changes of 100 KiB
	olds := []*anypb.Any{blob(10, 200<<10, 2)}                   // commit 2
	te.MustWrite(engine.OpInsert, olds)                          //
	news := []*anypb.Any{blob(10, 200<<10, 3)}                   // commit 3: 400 KiB with the old record
	te.MustWrite(engine.OpUpdate, news)                          //
	te.MustWrite(engine.OpInsert, []*anypb.Any{blob(11, 10, 4)}) // commit 4

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var changes []*pb.Change
	var last *pb.Position
	err := te.w.Watch(ctx, &pb.WatchRequest{Types: []string{"blob.Blob"}, Start: oldest(), OldRecords: true},
		releasing(func(bp *[]byte) error {
			if len(*bp) > room {
				t.Errorf("a message of %d bytes, over the bound of %d", len(*bp), room)
			}
			m := new(pb.WatchResponse)
			if err := proto.Unmarshal(*bp, m); err != nil {
				return err
			}
			if last != nil && (m.Progress.GetCommit() < last.GetCommit() ||
				m.Progress.GetCommit() == last.GetCommit() && last.Index == nil && m.Progress.Index != nil) {
				t.Errorf("progress went back from %v to %v", last, m.Progress)
			}
			for _, c := range m.Changes {
				if p := c.GetPosition(); p.GetCommit() > m.Progress.GetCommit() ||
					p.GetCommit() == m.Progress.GetCommit() && m.Progress.Index != nil && p.GetIndex() > m.Progress.GetIndex() {
					t.Errorf("change at %v in a message whose progress is %v", p, m.Progress)
				}
			}
			last = m.Progress
			changes = append(changes, m.Changes...)
			if len(changes) == 8 {
				cancel()
			}
			return nil
		}))
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	wantChanges(t, changes, 1, 0, small, nil)
	wantChanges(t, changes[5:], 2, 0, olds, nil)
	up := changes[6]
	if !bytes.Equal(up.GetRecord().GetValue(), news[0].Value) || up.GetOldRecord() != nil || !up.GetOldRecordOmitted() || up.GetRecordOmitted() {
		t.Fatalf("the update: record of %d bytes, old of %d, old omitted %v, record omitted %v; want the record and the old one omitted",
			len(up.GetRecord().GetValue()), len(up.GetOldRecord().GetValue()), up.GetOldRecordOmitted(), up.GetRecordOmitted())
	}
	if changes[7].GetPosition().GetCommit() != 4 {
		t.Fatalf("the change after the update is at %v", changes[7].GetPosition())
	}
}
