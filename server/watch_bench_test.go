package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

// BenchmarkIngestWatchLog measures what the change log costs durable
// ingest: the same inserts (batches of 1,000 ~100-byte records, one
// index) and upserts over existing keys (the log then holds the old
// records too) with the log off and on, in one run so the two compare as
// a ratio; and with one watcher reading along over gRPC.
func BenchmarkIngestWatchLog(b *testing.B) {
	for _, op := range []engine.Op{engine.OpInsert, engine.OpUpsert} {
		for _, log := range []string{"off", "on", "on+watcher"} {
			b.Run(fmt.Sprintf("engine/%v/log=%s", op, log), func(b *testing.B) {
				if log == "on+watcher" {
					b.Skip("the watcher runs over gRPC: see grpc/")
				}
				benchEngineLog(b, op, log == "on")
			})
			b.Run(fmt.Sprintf("grpc/%v/log=%s", op, log), func(b *testing.B) { benchGRPCLog(b, op, log) })
		}
	}
}

func benchEngineLog(b *testing.B, op engine.Op, logOn bool) {
	st, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	opts := engine.Options{}
	if logOn {
		opts.WatchRetention = time.Hour
	}
	e, err := engine.Open(context.Background(), st, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := e.ApplySchema(context.Background(), &pb.ApplySchemaRequest{Files: map[string]string{"bench.proto": benchProto}}); err != nil {
		b.Fatal(err)
	}
	batches := benchBatches(1000, b.N)
	w := e.NewWriter()
	if op == engine.OpUpsert { // the keys exist: every upsert replaces a record
		for _, recs := range batches {
			if err := w.Apply(context.Background(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, recs := range batches {
		if err := w.Apply(context.Background(), engine.Batch{Op: op, Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	reportRecords(b)
}

func benchGRPCLog(b *testing.B, op engine.Op, log string) {
	cfg := server.Config{DataDir: b.TempDir(), GRPCAddr: "127.0.0.1:0"}
	if log == "off" {
		cfg.WatchRetention = -1
	}
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()
	c, err := client.Dial(srv.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ApplySchema(context.Background(), map[string]string{"bench.proto": benchProto}, client.SchemaOptions{}); err != nil {
		b.Fatal(err)
	}
	batches := benchBatches(1000, b.N)
	if op == engine.OpUpsert {
		benchSend(b, c.API().Insert, batches)
	}
	var seen chan int
	if log == "on+watcher" {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st, err := c.API().Watch(ctx, &pb.WatchRequest{Types: []string{"bench.Item"}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			b.Fatal(err)
		}
		seen = make(chan int, 1)
		go func() {
			n := 0
			for n < b.N {
				resp, err := st.Recv()
				if err != nil {
					break
				}
				n += len(resp.Changes)
			}
			seen <- n
		}()
	}
	b.ReportAllocs()
	b.ResetTimer()
	open := c.API().Insert
	if op == engine.OpUpsert {
		open = c.API().Upsert
	}
	benchSend(b, open, batches)
	if seen != nil {
		if n := <-seen; n != b.N {
			b.Fatalf("the watcher saw %d changes of %d", n, b.N)
		}
	}
	reportRecords(b)
}

func benchSend(b *testing.B, open func(context.Context, ...grpc.CallOption) (grpc.ClientStreamingClient[pb.WriteRequest, pb.WriteResponse], error), batches [][]*anypb.Any) {
	st, err := open(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for _, recs := range batches {
		if err := st.Send(&pb.WriteRequest{Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := st.CloseAndRecv(); err != nil {
		b.Fatal(err)
	}
}
