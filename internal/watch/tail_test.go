package watch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// A watcher running beside the writer reads the newest entries from the
// log's tail; one that falls further behind than the tail holds reads
// the older ones from storage and comes back to the tail. Either way it
// receives every change once, in order, with its record.
func TestWatchTail(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tailBytes int64
		wantHits  bool
	}{
		{"default", 0, true},
		{"small", 2 << 10, true}, // a few entries: the watcher falls behind it
		{"off", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			te := watchEngine(t, engine.Options{WatchTailBytes: tc.tailBytes})
			const batches, per = 40, 7
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			// The watcher holds its first message with changes until the
			// writer is done, so that it is behind every entry but the
			// first batches.
			release := make(chan struct{})
			var got []*pb.Change
			started := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				first := true
				done <- te.w.Watch(ctx, &pb.WatchRequest{Types: []string{"shop.User"}, BatchSize: per}, releasing(func(bp *[]byte) error {
					b := *bp
					m := new(pb.WatchResponse)
					if err := proto.Unmarshal(b, m); err != nil {
						return err
					}
					if first {
						first = false
						close(started)
						return nil
					}
					if len(got) == 0 {
						<-release
					}
					got = append(got, m.Changes...)
					if len(got) >= batches*per {
						cancel()
					}
					return nil
				}))
			}()
			<-started
			w := te.E.NewWriter()
			defer w.Close()
			for i := range batches {
				if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: users(te, 1+per*i, per)}); err != nil {
					t.Fatal(err)
				}
				if _, err := w.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if ts := te.E.ChangeLog().TailStats(); tc.tailBytes != 0 && ts.Bytes > int(max(tc.tailBytes, 0)) {
				t.Fatalf("the tail holds %d bytes, more than its bound %d", ts.Bytes, tc.tailBytes)
			}
			close(release)
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("watch ended with %v", err)
			}
			if len(got) != batches*per {
				t.Fatalf("got %d changes, want %d", len(got), batches*per)
			}
			want := users(te, 1, batches*per)
			var prev *pb.Position
			for i, ch := range got {
				if !proto.Equal(ch.GetRecord(), want[i]) {
					t.Fatalf("change %d: record %v, want %v", i, ch.GetRecord(), want[i])
				}
				p := ch.GetPosition()
				if prev != nil && (p.GetCommit() < prev.GetCommit() || p.GetCommit() == prev.GetCommit() && p.GetIndex() <= prev.GetIndex()) {
					t.Fatalf("change %d at %v after %v", i, p, prev)
				}
				prev = p
			}
			ts := te.E.ChangeLog().TailStats()
			if tc.wantHits != (ts.Hits > 0) {
				t.Fatalf("%d entries read from the tail", ts.Hits)
			}
			if tc.name == "small" && ts.Misses == 0 {
				t.Fatal("a watcher behind the tail never read storage")
			}
			if ts.Bytes != 0 {
				t.Fatalf("the tail holds %d bytes with no watcher", ts.Bytes)
			}
		})
	}
}
