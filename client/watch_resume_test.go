package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// TestMain lets servertest run a server in a child process of this test
// binary, for the tests that kill it.
func TestMain(m *testing.M) { servertest.Main(m, server.Config{}) }

// keyID reads the id of a shop.User key.
func keyID(t *testing.T, ch *pb.Change) int64 {
	t.Helper()
	b := ch.GetKey().GetValue()
	num, typ, n := protowire.ConsumeTag(b)
	if num != 1 || typ != protowire.VarintType || n < 0 {
		t.Fatalf("key %x: no id", b)
	}
	v, m := protowire.ConsumeVarint(b[n:])
	if m < 0 {
		t.Fatalf("key %x: bad id", b)
	}
	return int64(v)
}

// insertBatches inserts users 0..total-1 in batches of batch, one batch
// at a time and in order, through server deaths: a batch that fails is
// sent again until it is in, ALREADY_EXISTS meaning that it was made
// durable before the acknowledgement was lost.
func insertBatches(ctx context.Context, c *client.Client, total, batch int64, written *atomic.Int64) error {
	for first := int64(0); first < total; written.Store(first) {
		err := func() error {
			w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{BatchRecords: int(batch)})
			if err != nil {
				return err
			}
			for id := first; id < first+batch; id++ {
				if err := w.WriteAny(user(id, fmt.Sprintf("u%d@example.com", id))); err != nil {
					_, _ = w.Close()
					return err
				}
			}
			_, err = w.Close()
			return err
		}()
		switch {
		case err == nil || status.Code(err) == codes.AlreadyExists:
			first += batch
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// TestWatchResumesAcrossKills kills the server with SIGKILL twice while a
// watch reads a feed of 100,000 inserts written as it goes, and starts it
// again on the same data directory and address: the watch, left to
// itself, delivers every change once and in order.
func TestWatchResumesAcrossKills(t *testing.T) {
	const total, batch = 100_000, 1000
	dir, addr := t.TempDir(), servertest.FreeAddr(t)
	child := servertest.StartAt(t, dir, addr)
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if _, err := c.ApplySchema(ctx, map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartOldest(), BatchSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	var wg sync.WaitGroup
	var werr error
	var written atomic.Int64 // users written so far
	wg.Add(1)
	go func() {
		defer wg.Done()
		werr = insertBatches(ctx, c, total, batch, &written)
	}()

	killAt := map[int64]bool{20_000: true, 55_000: true}
	var n int64
	var last *pb.Position
	for n < total && w.Next() {
		ch := w.Change()
		if id := keyID(t, ch); id != n || ch.GetOp() != pb.ChangeOp_CHANGE_OP_INSERT {
			t.Fatalf("change %d: %v of id %d at %s, want an insert of id %d", n, ch.GetOp(), id, client.FormatPosition(ch.GetPosition()), n)
		}
		if last != nil && !positionLess(last, ch.GetPosition()) {
			t.Fatalf("change %d at %s, after %s", n, client.FormatPosition(ch.GetPosition()), client.FormatPosition(last))
		}
		last = ch.GetPosition()
		n++
		if killAt[n] {
			t.Logf("kill after %d changes received, %d users written", n, written.Load())
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			child = servertest.StartAt(t, dir, addr)
		}
	}
	if n < total {
		t.Fatalf("watch ended after %d of %d changes: %v", n, total, w.Err())
	}
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("%d changes, %d resumes", n, w.Resumes())
	if got := w.Resumes(); got < 2 {
		t.Errorf("the watch resumed %d times across two kills", got)
	}
}

// positionLess reports whether a comes before b.
func positionLess(a, b *pb.Position) bool {
	if a.GetCommit() != b.GetCommit() {
		return a.GetCommit() < b.GetCommit()
	}
	return a.GetIndex() < b.GetIndex()
}

// TestWatchResumeSurfaces checks what resuming must not hide: with
// NoResume a stopped server ends the watch, and a bounded ResumeFor gives
// up with UNAVAILABLE when the server stays away.
func TestWatchResumeSurfaces(t *testing.T) {
	dir, addr := t.TempDir(), servertest.FreeAddr(t)
	child := servertest.StartAt(t, dir, addr)
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ApplySchema(t.Context(), map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	off, err := c.Watch(t.Context(), client.WatchOptions{Types: []string{"shop.User"}, NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	bounded, err := c.Watch(t.Context(), client.WatchOptions{Types: []string{"shop.User"}, ResumeFor: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	for name, w := range map[string]*client.Watcher{"NoResume": off, "ResumeFor": bounded} {
		if w.Next() {
			t.Fatalf("%s: a change from a dead server", name)
		}
		var ce *client.Error
		if !errors.As(w.Err(), &ce) || ce.Status.Code() != codes.Unavailable {
			t.Errorf("%s: Err %v, want UNAVAILABLE", name, w.Err())
		}
	}
}

// TestWatchResumeOutOfRange stops the server under a watch and, while the
// watch is away, lets retention trim the changes after its position: the
// watch, resuming, ends with OUT_OF_RANGE instead of skipping them.
func TestWatchResumeOutOfRange(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"}
	srv, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ApplySchema(t.Context(), map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	write(t, c, client.Insert, user(1, "a@x"))
	w, err := c.Watch(t.Context(), client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartOldest()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	next(t, w, 1)
	pos := w.Position()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	// Elsewhere, with a retention of a second, until the watch's position
	// is trimmed.
	cfg.WatchRetention = time.Second
	other, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := client.Dial(other.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for id := int64(2); ; id++ {
		write(t, oc, client.Insert, user(id, fmt.Sprintf("u%d@x", id)))
		probe, err := oc.Watch(t.Context(), client.WatchOptions{Types: []string{"shop.User"}, Start: client.StartAfter(pos)})
		if status.Code(err) == codes.OutOfRange {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		probe.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the position %s was not trimmed in 30 s", client.FormatPosition(pos))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := other.Stop(); err != nil {
		t.Fatal(err)
	}

	// Back at the watch's address.
	cfg.GRPCAddr = addr
	back, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = back.Stop() }()
	if w.Next() {
		t.Fatalf("a change after a trimmed position: %v", w.Change())
	}
	if code := status.Code(w.Err()); code != codes.OutOfRange {
		t.Fatalf("Err %v, want OUT_OF_RANGE", w.Err())
	}
}
