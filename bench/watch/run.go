package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// outcome is what one run measured.
type outcome struct {
	records   int64         // records written, every batch acknowledged
	writing   time.Duration // first send to the write stream's OK status
	delivered []float64     // per watcher: changes/s, first send to its last change
	lat       latencies     // acknowledgement to receipt, watchers pooled
	sync      bool          // the server fsynced writes
	embedded  bool          // the server was the lab's own, on a fresh store
}

// ingestRate is records/s durable.
func (o *outcome) ingestRate() float64 { return float64(o.records) / o.writing.Seconds() }

// readyTimeout bounds the wait for a watch's first message and catchUp
// the wait, after the writes end, for watchers to receive the last one.
const (
	readyTimeout = 30 * time.Second
	catchUp      = 60 * time.Second
)

// errWatchEnded is a watcher's end when the client's Watcher reports none.
var errWatchEnded = errors.New("the watch ended")

// run writes batches for d through one Write stream, every batch asking
// for its acknowledgement, while n watchers (0: none) watch the items'
// type from before the first write. It returns once every watcher has
// received every change written.
func (g *Experiment) run(ctx context.Context, t *bench.Target, n int, d time.Duration) (*outcome, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws := make([]*watcher, n)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: the watchers are done with their tallies
	defer cancel()
	for i := range ws {
		// Watch returns once the watch has begun: each change written
		// from here on reaches it.
		w, err := startWatcher(ctx, t, &wg)
		if err != nil {
			return nil, err
		}
		ws[i] = w
	}
	start := time.Now()
	acks, records, err := g.write(ctx, t, d)
	if err != nil {
		return nil, err
	}
	g.written.Add(records)
	o := &outcome{records: records, writing: acks.end.Sub(start)}
	for _, w := range ws {
		if err := w.wait(ctx, func(tl *changeTally) bool { return tl.changes >= records }, catchUp); err != nil {
			return nil, fmt.Errorf("watcher did not receive the %d changes written: %w", records, err)
		}
	}
	cancel()
	wg.Wait()
	for _, w := range ws {
		tl := &w.tally
		// Nothing but this run writes to an embedded server: each
		// watcher must have received each change once.
		if t.Embedded && tl.changes != records {
			return nil, fmt.Errorf("a watcher received %d changes of %d records written", tl.changes, records)
		}
		o.delivered = append(o.delivered, float64(tl.changes)/tl.last.Sub(start).Seconds())
		for _, a := range tl.arrivals {
			if at, ok := acks.at[a.commit]; ok {
				o.lat.add(a.at.Sub(at), a.n)
			}
		}
	}
	return o, nil
}

// watcher is one Watch stream tallying what it receives. mu guards tally
// and err while the stream runs; run reads them freely once it ended.
type watcher struct {
	mu     sync.Mutex
	tally  changeTally
	err    error         // why the stream ended, if it did
	notify chan struct{} // a message arrived or the stream ended (capacity 1)
}

func startWatcher(ctx context.Context, t *bench.Target, wg *sync.WaitGroup) (*watcher, error) {
	// A watcher has a connection of its own, as a service watching another
	// would: on the writer's connection its messages and the writer's
	// acknowledgements would queue behind each other in one HTTP/2 writer.
	c, err := client.Dial(t.Addr, t.ClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("dial watcher: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	// The watch's own context is ctx: rctx only bounds the wait for it
	// to begin.
	stop := context.AfterFunc(rctx, func() {
		if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			c.Close()
		}
	})
	// A failed stream is a failed run, not a pause to resume from.
	wt, err := c.Watch(ctx, client.WatchOptions{Types: []string{bench.ItemType}, Start: client.StartNow(), NoResume: true})
	stop()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("watch did not start: %w", err)
	}
	w := &watcher{notify: make(chan struct{}, 1)}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer c.Close()
		for {
			ok := wt.NextBatch()
			w.mu.Lock()
			if ok {
				if err := w.tally.add(wt.Batch(), bench.ItemType, time.Now()); err != nil {
					w.err = err
				}
			} else if w.err = wt.Err(); w.err == nil {
				w.err = errWatchEnded
			}
			err := w.err
			w.mu.Unlock()
			select {
			case w.notify <- struct{}{}:
			default:
			}
			if err != nil {
				wt.Close()
				return
			}
		}
	}()
	return w, nil
}

// wait waits until done holds of the tally, the stream ends, or timeout.
func (w *watcher) wait(ctx context.Context, done func(*changeTally) bool, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		w.mu.Lock()
		ok, err := done(&w.tally), w.err
		w.mu.Unlock()
		switch {
		case ok:
			return nil
		case err != nil:
			return err
		}
		select {
		case <-w.notify:
		case <-timer.C:
			return fmt.Errorf("nothing after %s", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ackTimes is when each batch's acknowledgement arrived, by its position
// (the commit), and when the stream's final status did.
type ackTimes struct {
	at  map[uint64]time.Time
	end time.Time
}

// write inserts batches of g.Batch fresh items for d, each asking for an
// acknowledgement, with at most g.window() of them unacknowledged. A
// goroutine of its own receives the acknowledgements, so that their times
// are not held back by a send waiting on flow control.
func (g *Experiment) write(ctx context.Context, t *bench.Target, d time.Duration) (*ackTimes, int64, error) {
	st, err := t.API.Write(ctx, bench.CallCodec())
	if err != nil {
		return nil, 0, fmt.Errorf("open write stream: %w", err)
	}
	acks := &ackTimes{at: map[uint64]time.Time{}}
	slots := make(chan struct{}, g.window())
	recvDone := make(chan error, 1)
	go func() {
		ack := new(pb.WriteStreamResponse)
		for {
			err := st.RecvMsg(ack)
			now := time.Now()
			if err != nil {
				acks.end = now
				if errors.Is(err, io.EOF) {
					err = nil
				}
				recvDone <- err
				return
			}
			acks.at[ack.GetPosition()] = now
			<-slots
		}
	}()
	var records int64
	sent := 0
	size := 0
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case slots <- struct{}{}:
		case err := <-recvDone:
			return nil, 0, fmt.Errorf("write stream ended early: %w", err)
		}
		buf := bench.AppendWriteOp(make([]byte, 0, size), pb.WriteOp_WRITE_OP_INSERT)
		first := g.nextID.Add(int64(g.Batch)) - int64(g.Batch)
		buf, _ = bench.AppendWriteRecords(buf, 2, bench.ItemType, first, g.Batch)
		buf = bench.AppendAck(buf)
		size = cap(buf)
		f := bench.Frame(buf)
		if err := st.SendMsg(&f); err != nil {
			return nil, 0, bench.StreamError(st, "send", err)
		}
		sent++
		records += int64(g.Batch)
	}
	if err := st.CloseSend(); err != nil {
		return nil, 0, fmt.Errorf("close: %w", err)
	}
	if err := <-recvDone; err != nil {
		return nil, 0, fmt.Errorf("insert: %w", err)
	}
	if len(acks.at) != sent {
		return nil, 0, fmt.Errorf("%d acknowledgements at distinct positions for %d batches", len(acks.at), sent)
	}
	return acks, records, nil
}

// window is how many batches may be unacknowledged: about 4 MiB of them,
// the server's per-stream flow-control window, as the ingest experiment's
// insert loop keeps.
func (g *Experiment) window() int {
	return max(2, (4<<20)/(g.Batch*bench.ItemWireBytes))
}
