package server_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server"
)

const tagsProto = `syntax = "proto3";
package tg;
import "protobase/v1/options.proto";
message Doc {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  repeated string tags = 2;
  string team = 3;
  string note = 4;
}
message TaggedDoc {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "tags" } };
  int64 id = 1;
  repeated string tags = 2;
  string team = 3;
  string note = 4;
}
`

// BenchmarkIngestTags measures durable inserts over gRPC (one client
// stream, batches of 1,000) of records with 10 tags drawn from 1,000
// values, into a type with an index on the tags ("index") and into one
// without ("none"): the ratio of their records/s is what the index costs
// ingest as a client sees it. The "-1k" pair does the same with records of
// about 1 KiB (a 900-byte note, YCSB's record size), whose own bytes weigh
// more beside their ten entries. Each sub-benchmark starts its own server;
// run them in separate processes, alternately, and compare medians.
// records/cpu-s divides by the CPU time the process (server and client)
// used meanwhile: on a shared machine the wall clock also counts other
// processes' turns.
//
//	go test -run '^$' -bench 'BenchmarkIngestTags/index$' -benchtime 200000x ./server/
//	go test -run '^$' -bench 'BenchmarkIngestTags/index-1k$' -benchtime 400000x ./server/
func BenchmarkIngestTags(b *testing.B) {
	for _, c := range []struct {
		name, typ string
		note      int
	}{{"index", "tg.TaggedDoc", 0}, {"none", "tg.Doc", 0}, {"index-1k", "tg.TaggedDoc", 900}, {"none-1k", "tg.Doc", 900}} {
		b.Run(c.name, func(b *testing.B) {
			srv, err := server.Start(context.Background(), server.Config{DataDir: b.TempDir(), GRPCAddr: "127.0.0.1:0"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = srv.Stop() })
			cl, err := client.Dial(srv.Addr())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = cl.Close() })
			if _, err := cl.ApplySchema(context.Background(), map[string]string{"tg.proto": tagsProto}, client.SchemaOptions{}); err != nil {
				b.Fatal(err)
			}
			batches := tagBatches(c.typ, 1000, b.N, c.note)
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			benchSend(b, cl.API().Insert, batches)
			b.StopTimer()
			reportRecords(b)
			b.ReportMetric(float64(b.N)/(processCPU(b)-cpu0).Seconds(), "records/cpu-s")
		})
	}
}

// tagBatches makes total records of typ in batches of size: ids from 0, a
// team, 10 tags of "tag0".."tag999" and, when note > 0, a note of that
// many bytes.
func tagBatches(typ string, size, total, note int) [][]*anypb.Any {
	rnd := rand.New(rand.NewPCG(1, 2))
	text := strings.Repeat("n", note)
	var out [][]*anypb.Any
	for id := 0; id < total; {
		n := min(size, total-id)
		recs := make([]*anypb.Any, n)
		for i := range recs {
			v := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(id))
			for range 10 {
				v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), "tag"+strconv.Itoa(rnd.IntN(1000)))
			}
			v = protowire.AppendString(protowire.AppendTag(v, 3, protowire.BytesType), "t"+strconv.Itoa(id%10))
			if note > 0 {
				v = protowire.AppendString(protowire.AppendTag(v, 4, protowire.BytesType), text)
			}
			recs[i] = &anypb.Any{TypeUrl: "type.googleapis.com/" + typ, Value: v}
			id++
		}
		out = append(out, recs)
	}
	return out
}
