package client_test

import (
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
	child, addr := servertest.Start(t, t.TempDir())
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	if _, err := c.ApplySchema(ctx, map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The stream is open on the server before it stops.
	if err := w.WriteAny(user(1, "one@example.com")); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}

	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	resume := func() {
		if stopped {
			stopped = false
			if err := child.Process.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()

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
