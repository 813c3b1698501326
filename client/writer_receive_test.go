package client_test

import (
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server"
)

// writerGoroutines counts the goroutines running the client's Writer
// code.
func writerGoroutines(t *testing.T) int {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "client.(*Writer)") {
			n++
		}
	}
	return n
}

// A writer whose acknowledgements have all arrived holds no goroutine:
// the goroutine that flushes receives its own acknowledgement, so that a
// writer of one record per Flush pays no hand-off between goroutines.
func TestWriterIdleHoldsNoGoroutine(t *testing.T) {
	c := startWriterServer(t, server.Config{})
	var ws []*client.Writer
	for i := range 20 {
		w, err := c.NewWriter(t.Context(), client.Insert, client.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		if err := w.WriteAny(user(int64(i+1), fmt.Sprintf("u%d@example.com", i))); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := w.Durable(); got != 1 {
			t.Fatalf("writer %d: durable %d after its Flush, want 1", i, got)
		}
	}
	// A background receiver started for an acknowledgement nobody waited
	// for ends once it has it.
	n := writerGoroutines(t)
	for i := 0; n > 0 && i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		n = writerGoroutines(t)
	}
	if n > 0 {
		t.Errorf("%d goroutines in the Writer's code for 20 idle writers", n)
	}
	for _, w := range ws {
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Goroutines sharing a writer, each flushing its own records, all get
// their acknowledgements whichever of them receives: every Flush returns
// with its records durable, and Close reports them all.
func TestWriterSharedFlushesAllAcknowledged(t *testing.T) {
	c := startWriterServer(t, server.Config{})
	w, err := c.NewWriter(t.Context(), client.Insert, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 16, 30
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				id := int64(g*each + i + 1)
				if err := w.WriteAny(user(id, fmt.Sprintf("u%d@example.com", id))); err != nil {
					errs <- err
					return
				}
				if err := w.Flush(); err != nil {
					errs <- err
					return
				}
				if got := w.Durable(); got < uint64(i+1) {
					errs <- fmt.Errorf("durable %d after %d of one goroutine's flushes", got, i+1)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ack, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ack.GetRecords() != goroutines*each || w.Durable() != goroutines*each {
		t.Errorf("last acknowledgement %v, durable %d; want %d records", ack, w.Durable(), goroutines*each)
	}
}

// Acknowledgements a writer asks for on its own, with nobody flushing,
// are received in the background: Durable advances without a Flush.
func TestWriterDurableAdvancesWithoutFlush(t *testing.T) {
	c := startWriterServer(t, server.Config{})
	w, err := c.NewWriter(t.Context(), client.Insert, client.WriterOptions{BatchRecords: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Each one-record batch is sent at once; the first asks for an
	// acknowledgement, as does the first after ackInterval.
	for i := range 3 {
		if err := w.WriteAny(user(int64(i+1), fmt.Sprintf("u%d@example.com", i))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	deadline := time.Now().Add(20 * time.Second)
	for w.Durable() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := w.Durable(); got != 3 {
		t.Errorf("durable %d without a Flush, want 3", got)
	}
}

// Goroutines sharing a writer whose batch fails all stop, none waits
// forever: one goroutine inserts a key that exists while the others
// flush their own records. Every Flush returns; the first error is the
// writer's for every call after it; each record whose Flush returned nil
// is stored.
func TestWriterSharedFlushesStopAtError(t *testing.T) {
	c := startWriterServer(t, server.Config{})
	w, err := c.NewWriter(t.Context(), client.Insert, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 8, 40
	var wg sync.WaitGroup
	flushed := make([][]int64, goroutines) // ids whose Flush returned nil, by goroutine
	failed := make([]error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				id := int64(g*each + i + 1)
				email := fmt.Sprintf("u%d@example.com", id)
				if g == 0 && i == each/2 {
					id = 1 // inserted already, by this goroutine's first Flush
				}
				if err := w.WriteAny(user(id, email)); err != nil {
					failed[g] = err
					return
				}
				if err := w.Flush(); err != nil {
					failed[g] = err
					return
				}
				flushed[g] = append(flushed[g], id)
			}
		})
	}
	wg.Wait()
	if failed[0] == nil {
		t.Fatal("the duplicate key's Flush returned nil")
	}
	var ids []any
	for g := range goroutines {
		if failed[g] != nil && failed[g].Error() != failed[0].Error() {
			t.Errorf("goroutine %d: %v; the writer's error is %v", g, failed[g], failed[0])
		}
		for _, id := range flushed[g] {
			ids = append(ids, id)
		}
	}
	recs, err := c.Get(t.Context(), "shop.User", ids...)
	if err != nil {
		t.Fatal(err)
	}
	if missing := client.MissingKeys(ids, recs); len(missing) > 0 {
		t.Fatalf("records %v were acknowledged and are missing", missing)
	}
	if _, err := w.Close(); err == nil {
		t.Error("Close after the failure returned nil")
	}
	t.Logf("%d records flushed before the failure: %v", len(ids), failed[0])
}
