package server_test

import (
	"context"
	"testing"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server"
)

// backendBenchRecords is the data set of BenchmarkBackends' lookups: small
// enough to load into etcd in seconds.
const backendBenchRecords = 100_000

// BenchmarkBackends compares the storage backends in one run, over gRPC:
// durable inserts in batches of 1,000 (bench.Item, one secondary index),
// and Search primary-key lookups in batches of 1,000 on
// backendBenchRecords records. etcd runs as one embedded member (its
// limits raised so that a batch of 1,000 fits one transaction), on the
// same machine as the server, so the figures show the cost of the
// backend's protocol and its fsync, not of a network.
//
//	go test ./server -run '^$' -bench BenchmarkBackends -count 3
func BenchmarkBackends(b *testing.B) {
	for _, be := range backends {
		b.Run(be.Name+"/ingest/batch=1000", func(b *testing.B) {
			c := benchBackendServer(b, be)
			batches := benchBatches(1000, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			benchSend(b, c.API().Insert, batches)
			reportRecords(b)
		})
		b.Run(be.Name+"/search-pk/batch=1000", func(b *testing.B) {
			c := benchBackendServer(b, be)
			loadBenchItems(b, c, backendBenchRecords)
			benchSearchPK(b, c, backendBenchRecords, 1000)
		})
	}
}

// benchBackendServer starts a durable server on a fresh store of be with
// the bench schema applied and returns a client of it.
func benchBackendServer(b *testing.B, be backend) *client.Client {
	b.Helper()
	cfg := be.Config(b)
	cfg.GRPCAddr = "127.0.0.1:0"
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
	return c
}
