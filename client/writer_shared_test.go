package client_test

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server/servertest"
)

// A Flush waiting for its acknowledgement leaves the writer to the other
// goroutines sharing it, so that their records can join the same fsync.
// With the server stopped (SIGSTOP), one goroutine's Flush waits; another
// goroutine's WriteAny must still return, and its Flush send its batch.
// Once the server runs again, both Flushes return and both records are
// durable.
func TestWriterFlushLeavesWriterFree(t *testing.T) {
	c, w, resume := stoppedWriter(t)
	ctx := t.Context()

	first := make(chan error, 1)
	if err := w.WriteAny(user(2, "two@example.com")); err != nil {
		t.Fatal(err)
	}
	go func() { first <- w.Flush() }()
	// Give the first Flush time to send and start waiting. Had it not
	// yet, the second goroutine would find the writer free either way:
	// the test could only pass without testing, never fail wrongly.
	time.Sleep(200 * time.Millisecond)

	second := make(chan error, 1)
	written := make(chan struct{})
	go func() {
		if err := w.WriteAny(user(3, "three@example.com")); err != nil {
			second <- err
			close(written)
			return
		}
		close(written)
		second <- w.Flush()
	}()
	// A writer locked for the whole wait would hold this WriteAny until
	// the server resumes, which it does not do on its own.
	select {
	case <-written:
	case <-time.After(20 * time.Second):
		resume()
		t.Fatal("WriteAny waited for another goroutine's Flush to be acknowledged")
	}
	resume()
	for i, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatalf("flush %d: %v", i+1, err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := c.Get(ctx, "shop.User", 1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if missing := client.MissingKeys([]any{1, 2, 3}, recs); len(missing) > 0 {
		t.Fatalf("acknowledged records %v are missing", missing)
	}
}

// Goroutines flushing one writer while two batches await their
// acknowledgements gather into one batch: with the server stopped, two
// Flushes send (batches 1 and 2) and three more leave their records
// pending; once the server runs again, the first to see a place free sends
// the three records as batch 3, and Close's flush is batch 4. Every
// record is durable. Sending a batch per Flush would make Close's batch 6.
func TestWriterFlushesGather(t *testing.T) {
	c, w, resume := stoppedWriter(t)
	ctx := t.Context()
	done := make(chan error, 5)
	flush := func(id int64) {
		if err := w.WriteAny(user(id, fmt.Sprintf("u%d@example.com", id))); err != nil {
			done <- err
			return
		}
		done <- w.Flush()
	}
	// One at a time, so that the first two have sent before the others
	// flush. A goroutine slower than the pauses could only send more
	// batches than it should: the test can fail wrongly, never pass so.
	// The pauses are long for that reason: on a machine busy with other
	// tests a goroutine waited more than 300 ms for its turn.
	for id := int64(2); id <= 6; id++ {
		go flush(id)
		time.Sleep(time.Second)
	}
	resume()
	for range 5 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	ack, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ack.GetBatch() != 4 || ack.GetRecords() != 6 {
		t.Errorf("Close acknowledged batch %d and %d records, want batch 4 and 6 records", ack.GetBatch(), ack.GetRecords())
	}
	keys := []any{1, 2, 3, 4, 5, 6}
	recs, err := c.Get(ctx, "shop.User", keys...)
	if err != nil {
		t.Fatal(err)
	}
	if missing := client.MissingKeys(keys, recs); len(missing) > 0 {
		t.Fatalf("acknowledged records %v are missing", missing)
	}
}

// stoppedWriter starts a server, opens a Writer on it with user 1 written
// and acknowledged (the stream is open on the server), and stops the
// server (SIGSTOP). resume, also run at the test's end, lets it run again.
func stoppedWriter(t *testing.T) (c *client.Client, w *client.Writer, resume func()) {
	t.Helper()
	child, addr := servertest.Start(t, t.TempDir())
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.ApplySchema(t.Context(), map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err = c.NewWriter(t.Context(), client.Insert, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteAny(user(1, "u1@example.com")); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := child.Process.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(resume)
	return c, w, resume
}
