package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

const benchProto = `syntax = "proto3";
package bench;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "name" } };
  int64 id = 1;
  string name = 2;
  string email = 3;
  int64 created = 4;
  string note = 5;
}
`

// benchItem encodes a ~100-byte bench.Item.
func benchItem(dst []byte, id int64) []byte {
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(id))
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendString(dst, fmt.Sprintf("name-%012d", id%100000))
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	dst = protowire.AppendString(dst, fmt.Sprintf("user%010d@example.com", id))
	dst = protowire.AppendTag(dst, 4, protowire.VarintType)
	dst = protowire.AppendVarint(dst, 1700000000000+uint64(id))
	dst = protowire.AppendTag(dst, 5, protowire.BytesType)
	dst = protowire.AppendString(dst, "lorem ipsum dolor sit amet consectetur")
	return dst
}

func benchBatches(batch, total int) [][]*anypb.Any {
	var out [][]*anypb.Any
	for id := 0; id < total; {
		n := min(batch, total-id)
		b := make([]*anypb.Any, n)
		for i := range b {
			b[i] = &anypb.Any{TypeUrl: "type.googleapis.com/bench.Item", Value: benchItem(nil, int64(id))}
			id++
		}
		out = append(out, b)
	}
	return out
}

var ingestSizes = []int{1, 100, 1000}

// BenchmarkIngest measures durable (and, for comparison, non-durable)
// batched inserts of ~100-byte records with one secondary index: over gRPC
// through a client stream, straight into the engine, and as raw storage
// batches of the same keys and values (the ceiling: no validation, no
// existence checks, no index maintenance logic).
func BenchmarkIngest(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, size := range ingestSizes {
			name := fmt.Sprintf("batch=%d/sync=%v", size, sync)
			b.Run("grpc/"+name, func(b *testing.B) { benchGRPC(b, size, sync) })
			b.Run("engine/"+name, func(b *testing.B) { benchEngine(b, size, sync) })
			b.Run("raw/"+name, func(b *testing.B) { benchRaw(b, size, sync) })
		}
	}
}

func reportRecords(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}

// benchServer starts a server with the bench schema applied and returns
// it with a connected client; both are closed when the benchmark ends.
func benchServer(b *testing.B, sync bool) (*server.Server, *client.Client) {
	b.Helper()
	return benchServerConfig(b, server.Config{NoSync: !sync})
}

// benchServerConfig is benchServer with cfg (its DataDir and GRPCAddr
// set here).
func benchServerConfig(b *testing.B, cfg server.Config) (*server.Server, *client.Client) {
	b.Helper()
	cfg.DataDir, cfg.GRPCAddr = b.TempDir(), "127.0.0.1:0"
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(srv.Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if _, err := c.ApplySchema(context.Background(), map[string]string{"bench.proto": benchProto}, client.SchemaOptions{}); err != nil {
		b.Fatal(err)
	}
	return srv, c
}

func benchGRPC(b *testing.B, size int, sync bool) {
	_, c := benchServer(b, sync)
	batches := benchBatches(size, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	benchSend(b, c.API().Insert, batches)
	reportRecords(b)
}

func benchEngine(b *testing.B, size int, sync bool) {
	st, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Layout: keyspace.Layout{}, Sync: sync})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	e, err := engine.Open(context.Background(), st, engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := e.ApplySchema(context.Background(), &pb.ApplySchemaRequest{Files: map[string]string{"bench.proto": benchProto}}); err != nil {
		b.Fatal(err)
	}
	batches := benchBatches(size, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	w := e.NewWriter()
	for _, recs := range batches {
		if err := w.Apply(context.Background(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	reportRecords(b)
}

func benchRaw(b *testing.B, size int, sync bool) {
	st, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Layout: keyspace.Layout{}, Sync: sync})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	batches := benchBatches(size, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	bt := st.NewBatch()
	defer bt.Close()
	var key, ix []byte
	for n, recs := range batches {
		bt.Reset()
		bt.Stamp(uint64(n + 1))
		for i, a := range recs {
			id := int64(n*size + i)
			key = orderedcode.AppendInt(binary.BigEndian.AppendUint32(append(key[:0], 1), 1), id)
			bt.Set(key, a.Value)
			ix = binary.BigEndian.AppendUint32(append(ix[:0], 2), 1)
			ix = orderedcode.AppendString(ix, fmt.Sprintf("name-%012d", id%100000))
			ix = append(ix, key[5:]...)
			bt.Set(ix, nil)
		}
		if err := st.Commit(bt); err != nil {
			b.Fatal(err)
		}
	}
	reportRecords(b)
}

// BenchmarkIngestVolume inserts b.N records with one index straight into
// the engine (batches of 1,000, no fsync: the disk is not the point) with
// memtables of 64 and 128 MiB, and reports the background work each
// record cost: sstable bytes written by flushes and compactions, and the
// flushes and compactions per million records. Run it with a fixed count
// (-benchtime 2000000x): the work grows with the data.
func BenchmarkIngestVolume(b *testing.B) {
	for _, mib := range []int64{64, 128} {
		b.Run(fmt.Sprintf("memtable=%dMiB", mib), func(b *testing.B) {
			st, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Layout: keyspace.Layout{}, MemTableBytes: mib << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			e, err := engine.Open(context.Background(), st, engine.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			if _, err := e.ApplySchema(context.Background(), &pb.ApplySchemaRequest{Files: map[string]string{"bench.proto": benchProto}}); err != nil {
				b.Fatal(err)
			}
			batches := benchBatches(1000, b.N)
			b.ResetTimer()
			w := e.NewWriter()
			for _, recs := range batches {
				if err := w.Apply(context.Background(), engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			if err := st.Flush(); err != nil {
				b.Fatal(err)
			}
			m := st.Metrics()
			b.ReportMetric(float64(m.FlushedBytes+m.CompactedBytes)/float64(b.N), "written-B/record")
			b.ReportMetric(float64(m.Flushes)*1e6/float64(b.N), "flushes/Mrecord")
			b.ReportMetric(float64(m.Compactions)*1e6/float64(b.N), "compactions/Mrecord")
			reportRecords(b)
		})
	}
}
