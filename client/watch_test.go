package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// write applies one batch of op and returns its acknowledgement.
func write(t *testing.T, c *client.Client, op client.Op, recs ...*anypb.Any) *pb.WriteStreamResponse {
	t.Helper()
	w, err := c.NewWriter(t.Context(), op, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.WriteAny(r); err != nil {
			t.Fatal(err)
		}
	}
	ack, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return ack
}

// next reads n changes, failing the test if the watch ends first or they
// take more than a generous deadline (the watch's context ends then).
func next(t *testing.T, w *client.Watcher, n int) []*pb.Change {
	t.Helper()
	var out []*pb.Change
	for len(out) < n && w.Next() {
		out = append(out, w.Change())
	}
	if len(out) < n {
		t.Fatalf("watch ended after %d of %d changes: %v", len(out), n, w.Err())
	}
	return out
}

// describe renders changes as "op id@commit.index" for comparison.
func describe(chs []*pb.Change) []string {
	var out []string
	for _, ch := range chs {
		out = append(out, fmt.Sprintf("%v %x@%s", ch.GetOp(), ch.GetKey().GetValue(), client.FormatPosition(ch.GetPosition())))
	}
	return out
}

func watchCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestWatchResumesExactlyOnce(t *testing.T) {
	c := startWriterServer(t, server.Config{NoSync: true})
	ctx := watchCtx(t)
	first := write(t, c, client.Insert, user(1, "a@x"), user(2, "b@x"), user(3, "c@x"))
	write(t, c, client.Upsert, user(2, "b@y"), user(4, "d@x"))
	write(t, c, client.Remove, user(3, ""))
	const total = 3 + 2 + 1

	w, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartOldest(), OldRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	all := next(t, w, total)
	w.Close()
	if w.Next() || w.Err() != nil {
		t.Fatalf("after Close: Next true or Err %v", w.Err())
	}
	ops := []pb.ChangeOp{1, 1, 1, 2, 1, 3}
	for i, ch := range all {
		if ch.GetOp() != ops[i] || ch.GetType() != "shop.User" {
			t.Fatalf("change %d: %v", i, ch)
		}
	}
	if upd := all[3]; upd.GetOldRecord() == nil || !proto.Equal(upd.GetOldRecord(), user(2, "b@x")) || !proto.Equal(upd.GetRecord(), user(2, "b@y")) {
		t.Fatalf("update without its old record: %v", upd)
	}
	if rm := all[5]; rm.GetRecord() != nil || !proto.Equal(rm.GetOldRecord(), user(3, "c@x")) {
		t.Fatalf("remove: %v", rm)
	}

	// Stopped after each change in turn, a new watch from Position goes
	// on with the next one: no gap, no duplicate.
	for k := 1; k < total; k++ {
		w, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartOldest()})
		if err != nil {
			t.Fatal(err)
		}
		head := next(t, w, k)
		w.Close()
		w, err = c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartAfter(w.Position())})
		if err != nil {
			t.Fatal(err)
		}
		tail := next(t, w, total-k)
		w.Close()
		if got, want := fmt.Sprint(describe(append(head, tail...))), fmt.Sprint(describe(all)); got != want {
			t.Fatalf("stopped after %d: %s, want %s", k, got, want)
		}
	}

	// After the first write's acknowledgement: the rest.
	w, err = c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartAfterCommit(first.GetPosition())})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(describe(next(t, w, total-3))), fmt.Sprint(describe(all[3:])); got != want {
		t.Fatalf("after commit %d: %s, want %s", first.GetPosition(), got, want)
	}
	w.Close()
}

// A filtered watch sends only the matches, and its Position moves past
// what it filtered out: resumed from there, it sends only later changes.
func TestWatchFilterAndProgress(t *testing.T) {
	c := startWriterServer(t, server.Config{NoSync: true})
	ctx := watchCtx(t)
	w, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Filter: `email contains "@keep"`})
	if err != nil {
		t.Fatal(err)
	}
	write(t, c, client.Insert, user(1, "a@keep"), user(2, "b@drop"))
	last := write(t, c, client.Insert, user(3, "c@drop"), user(4, "d@keep"), user(5, "e@drop"))
	got := next(t, w, 2)
	if !proto.Equal(got[0].GetRecord(), user(1, "a@keep")) || !proto.Equal(got[1].GetRecord(), user(4, "d@keep")) {
		t.Fatalf("filtered watch sent %v", describe(got))
	}
	pos := w.Position()
	if pos.GetCommit() != got[1].GetPosition().GetCommit() {
		t.Fatalf("position %s is not in the commit of the last change %s", client.FormatPosition(pos), client.FormatPosition(got[1].GetPosition()))
	}
	w.Close()
	w, err = c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Filter: `email contains "@keep"`, Start: client.StartAfter(pos)})
	if err != nil {
		t.Fatal(err)
	}
	write(t, c, client.Insert, user(6, "f@keep"))
	if ch := next(t, w, 1)[0]; !proto.Equal(ch.GetRecord(), user(6, "f@keep")) || ch.GetPosition().GetCommit() <= last.GetPosition() {
		t.Fatalf("resumed watch sent %v", describe([]*pb.Change{ch}))
	}
	w.Close()
}

func TestWatchErrors(t *testing.T) {
	c := startWriterServer(t, server.Config{NoSync: true})
	ctx := watchCtx(t)
	if _, err := c.Watch(ctx, client.WatchOptions{}); err == nil {
		t.Error("a watch of no type started")
	}
	if _, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Filter: "id = 1", Where: client.Eq("id", 1)}); err == nil {
		t.Error("a watch with both Where and Filter started")
	}
	ack := write(t, c, client.Insert, user(1, "a@x"))
	for _, tc := range []struct {
		name string
		opts client.WatchOptions
		code codes.Code
	}{
		{"unknown type", client.WatchOptions{Types: []string{"demo.Nope"}}, codes.NotFound},
		{"bad filter", client.WatchOptions{Types: []string{"shop.User"}, Filter: "id >="}, codes.InvalidArgument},
		{"unknown field", client.WatchOptions{Types: []string{"shop.User"}, Filter: "nickname > 1"}, codes.InvalidArgument},
		{"a position past the last commit", client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartAfterCommit(ack.GetPosition() + 1000)}, codes.OutOfRange},
	} {
		// The server's refusal is Watch's error.
		w, err := c.Watch(ctx, tc.opts)
		if err == nil {
			w.Close()
		}
		if codeOf(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}

	// Close from another goroutine ends a waiting Next without error; a
	// cancelled context ends it with Canceled.
	w, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() { done <- w.Next() }()
	w.Close()
	if <-done || w.Err() != nil {
		t.Errorf("closed watch: Err %v", w.Err())
	}
	cctx, cancel := context.WithCancel(ctx)
	w, err = c.Watch(cctx, client.WatchOptions{Types: []string{"shop.User"}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- w.Next() }()
	cancel()
	if <-done || codeOf(w.Err()) != codes.Canceled {
		t.Errorf("cancelled watch: Err %v", w.Err())
	}
}

func codeOf(err error) codes.Code {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Status.Code()
	}
	return codes.Unknown
}

// While Next waits on a watch whose filter drops every change, Position,
// read from another goroutine, moves on with the server's progress marks.
func TestWatchPositionWhileWaiting(t *testing.T) {
	c := startWriterServer(t, server.Config{NoSync: true})
	ctx := watchCtx(t)
	w, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Filter: `email contains "@keep"`})
	if err != nil {
		t.Fatal(err)
	}
	start := w.Position()
	got := make(chan *pb.Change, 1)
	go func() {
		if w.Next() {
			got <- w.Change()
		}
		close(got)
	}()
	ack := write(t, c, client.Insert, user(1, "a@drop"), user(2, "b@drop"))
	deadline := time.Now().Add(30 * time.Second)
	for w.Position().GetCommit() < ack.GetPosition() {
		if time.Now().After(deadline) {
			t.Fatalf("Position stayed at %s (started at %s) while the server considered commit %d",
				client.FormatPosition(w.Position()), client.FormatPosition(start), ack.GetPosition())
		}
		time.Sleep(10 * time.Millisecond) // polling a state the server's progress moves
	}
	write(t, c, client.Insert, user(3, "c@keep"))
	if ch := <-got; ch == nil || !proto.Equal(ch.GetRecord(), user(3, "c@keep")) {
		t.Fatalf("the waiting Next returned %v", ch)
	}
	w.Close()
}

// Taken by NextBatch, a watch delivers the same changes as by Next, in
// order, with Position after each batch; changes kept from Next stay
// intact while later batches are decoded over the storage of earlier ones,
// and a batch cloned stays intact too.
func TestWatchNextBatch(t *testing.T) {
	c := startWriterServer(t, server.Config{NoSync: true})
	ctx := watchCtx(t)
	const batches, per = 6, 50
	for b := range batches {
		var recs []*anypb.Any
		for i := range per {
			recs = append(recs, user(int64(b*per+i+1), fmt.Sprintf("u%d@x", b*per+i)))
		}
		write(t, c, client.Insert, recs...)
	}
	ref, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartOldest()})
	if err != nil {
		t.Fatal(err)
	}
	want := describe(next(t, ref, batches*per))
	ref.Close()

	// Batches of 7: the messages do not end with the commits. Next takes
	// the first three changes, NextBatch the rest of their message and
	// the others; one batch is cloned and checked at the end.
	w, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartOldest(), BatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	kept := next(t, w, 3)
	got := append([]*pb.Change(nil), kept...)
	keptWant := describe(kept)
	var cloned []*pb.Change
	clonedAt := 0
	for len(got) < batches*per && w.NextBatch() {
		batch := w.Batch()
		if len(batch) == 0 {
			t.Fatal("NextBatch true with an empty batch")
		}
		last := batch[len(batch)-1].GetPosition()
		// Position is the batch's last change, or the progress after it.
		if p := w.Position(); p.GetCommit() < last.GetCommit() ||
			(p.GetCommit() == last.GetCommit() && p.Index != nil && p.GetIndex() != last.GetIndex()) {
			t.Fatalf("Position %s after a batch ending at %s", client.FormatPosition(p), client.FormatPosition(last))
		}
		if cloned == nil && len(got) > 100 {
			clonedAt = len(got)
			for _, ch := range batch {
				cloned = append(cloned, proto.CloneOf(ch))
			}
		}
		// Described now: the batch is decoded over by the next call.
		for _, d := range describe(batch) {
			got = append(got, &pb.Change{Type: d})
		}
	}
	w.Close()
	if len(got) != batches*per {
		t.Fatalf("%d changes of %d: %v", len(got), batches*per, w.Err())
	}
	var gotDesc []string
	for i, ch := range got {
		if i < len(kept) {
			gotDesc = append(gotDesc, describe([]*pb.Change{ch})...)
			continue
		}
		gotDesc = append(gotDesc, ch.GetType())
	}
	if fmt.Sprint(gotDesc) != fmt.Sprint(want) {
		t.Fatalf("by batches:\n%v\nwant\n%v", gotDesc, want)
	}
	if fmt.Sprint(describe(kept)) != fmt.Sprint(keptWant) {
		t.Fatalf("changes kept from Next changed: %v, were %v", describe(kept), keptWant)
	}
	if len(cloned) == 0 || fmt.Sprint(describe(cloned)) != fmt.Sprint(want[clonedAt:clonedAt+len(cloned)]) {
		t.Fatalf("cloned batch: %v, want %v", describe(cloned), want[clonedAt:clonedAt+len(cloned)])
	}
	for _, ch := range cloned {
		if ch.GetRecord() == nil || ch.GetType() != "shop.User" {
			t.Fatalf("cloned change: %v", ch)
		}
	}
}
