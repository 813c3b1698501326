package watch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// BenchmarkWatchRead is what receiving changes costs, apart from the
// writer: the log is written first, then each iteration one watcher reads
// all of it from the oldest change, through the whole path (the server
// reading and encoding, gRPC on both sides, the client decoding), and it
// reports the process's CPU time per change (cpu-ns/change). Each
// consumer checks every change as the watch experiment does. Consumers:
// the Go client's Watcher taking batches (NextBatch: slabs reused), the
// Watcher taking changes one by one (Next: new slabs per message), and
// the generated decoder on the raw stub (what the Go client did before
// its watch codec), and a floor that decodes nothing: it counts the
// changes in each response's bytes (about what the watch experiment's
// watchers do). One invocation compares them:
//
//	go test -run '^$' -bench WatchRead -benchtime 5x ./bench/watch/
func BenchmarkWatchRead(b *testing.B) {
	ctx := context.Background()
	t := labtest.ItemTarget(b, bench.TargetConfig{})
	g := &Experiment{Batch: 1000}
	g.nextID.Store(1)
	_, records, err := g.write(ctx, t, 500*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		read func(context.Context, *client.Client, int64) error
	}{{"nextbatch", readBatches}, {"next", readOneByOne}, {"generated", readGenerated}, {"undecoded", readUndecoded}} {
		b.Run(c.name, func(b *testing.B) {
			cl, err := client.Dial(t.Addr, t.ClientOptions()...)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			var cpu time.Duration
			var changes int64
			for b.Loop() {
				before := processCPU(b)
				if err := c.read(ctx, cl, records); err != nil {
					b.Fatal(err)
				}
				cpu += processCPU(b) - before
				changes += records
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(changes), "cpu-ns/change")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func oldest() client.WatchOptions {
	return client.WatchOptions{Types: []string{bench.ItemType}, Start: client.StartOldest()}
}

// readBatches reads n changes with Watcher.NextBatch.
func readBatches(ctx context.Context, c *client.Client, n int64) error {
	w, err := c.Watch(ctx, oldest())
	if err != nil {
		return err
	}
	defer w.Close()
	var tl changeTally
	for tl.changes < n && w.NextBatch() {
		if err := tl.add(w.Batch(), bench.ItemType, time.Time{}); err != nil {
			return err
		}
	}
	return tallied(&tl, n, w.Err())
}

// readOneByOne reads n changes with Watcher.Next.
func readOneByOne(ctx context.Context, c *client.Client, n int64) error {
	w, err := c.Watch(ctx, oldest())
	if err != nil {
		return err
	}
	defer w.Close()
	var tl changeTally
	one := make([]*pb.Change, 1)
	for tl.changes < n && w.Next() {
		one[0] = w.Change()
		if err := tl.add(one, bench.ItemType, time.Time{}); err != nil {
			return err
		}
	}
	return tallied(&tl, n, w.Err())
}

// readGenerated reads n changes from the raw stub, decoded by the
// generated code.
func readGenerated(ctx context.Context, c *client.Client, n int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.API().Watch(ctx, &pb.WatchRequest{Types: []string{bench.ItemType}, Start: client.StartOldest()})
	if err != nil {
		return err
	}
	var tl changeTally
	for tl.changes < n {
		resp, err := st.Recv()
		if err != nil {
			return tallied(&tl, n, err)
		}
		if err := tl.add(resp.GetChanges(), bench.ItemType, time.Time{}); err != nil {
			return err
		}
	}
	return nil
}

func tallied(tl *changeTally, n int64, err error) error {
	switch {
	case tl.changes == n:
		return nil
	case err != nil:
		return fmt.Errorf("%d changes of %d: %w", tl.changes, n, err)
	}
	return fmt.Errorf("%d changes of %d", tl.changes, n)
}

// wireCount counts the changes in encoded WatchResponses (bench.WireTally).
type wireCount struct{ n int64 }

func (w *wireCount) AddWire(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 {
			w.n++
		}
	}
	return nil
}

// readUndecoded counts n changes without decoding them.
func readUndecoded(ctx context.Context, c *client.Client, n int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.API().Watch(ctx, &pb.WatchRequest{Types: []string{bench.ItemType}, Start: client.StartOldest()}, bench.CallCodec())
	if err != nil {
		return err
	}
	var w wireCount
	for w.n < n {
		if err := st.RecvMsg(&w); err != nil {
			return fmt.Errorf("%d changes of %d: %w", w.n, n, err)
		}
	}
	if w.n != n {
		return fmt.Errorf("%d changes of %d", w.n, n)
	}
	return nil
}
