package server_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/certs/certstest"
	"github.com/protobase/protobase/server"
)

// securityModes are the configurations BenchmarkSecurity compares:
// plaintext without authentication; TLS with an admin key (every type);
// TLS with a schema key scoped to the benchmark's package, so that every
// record and query also passes a scope check.
var securityModes = []string{"off", "secured", "secured-scoped"}

// BenchmarkSecurity measures what security costs, in one run: Search
// primary-key lookups at batch 1 and 1,000 and durable ingest at batch
// 1,000, in each of securityModes. A stream is authenticated once; each
// message then costs an atomic load (revocation) and, for a scoped key, a
// scope check per record or query; TLS costs its record encryption. Each
// mode's server runs alone (its cleanup runs when its sub-benchmark ends)
// and is compacted after loading, so that every mode reads the same layout
// with no compaction competing. The read data set is readBenchRecords
// records (PROTOBASE_BENCH_RECORDS).
func BenchmarkSecurity(b *testing.B) {
	total := readBenchRecords()
	for _, mode := range securityModes {
		b.Run(mode, func(b *testing.B) {
			srv, c := securityBenchServer(b, mode, false)
			loadBenchItems(b, c, total)
			if err := server.Compact(context.Background(), srv); err != nil {
				b.Fatal(err)
			}
			for _, batch := range []int{1, 1000} {
				b.Run(fmt.Sprintf("search-pk/batch=%d", batch), func(b *testing.B) { benchSearchPK(b, c, total, batch) })
			}
			b.Run("ingest/batch=1000/sync=true", func(b *testing.B) {
				_, c := securityBenchServer(b, mode, true)
				batches := benchBatches(1000, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				benchSend(b, c.API().Insert, batches)
				reportRecords(b)
			})
		})
	}
}

// securityBenchServer starts a server in mode with the bench schema and
// returns it with a client holding the mode's key over the mode's
// transport; both close when b ends.
func securityBenchServer(b *testing.B, mode string, sync bool) (*server.Server, *client.Client) {
	b.Helper()
	cfg := server.Config{DataDir: b.TempDir(), GRPCAddr: "127.0.0.1:0", NoSync: !sync}
	var opts []client.Option
	if mode != "off" {
		ca := certstest.NewCA(b, "bench")
		cert := ca.Server(b, "server")
		admin, err := auth.GenerateKey()
		if err != nil {
			b.Fatal(err)
		}
		cfg.TLSCertFile, cfg.TLSKeyFile = cert.CertFile, cert.KeyFile
		cfg.Auth, cfg.AdminKey = true, admin
		opts = append(opts, client.WithTLS(ca.ClientConfig(b)), client.WithAPIKey(admin))
	}
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	if mode == "secured-scoped" {
		key, _, err := srv.Keys().Create(nil, "bench", auth.RoleSchema, []string{"bench.*"})
		if err != nil {
			b.Fatal(err)
		}
		opts[len(opts)-1] = client.WithAPIKey(key)
	}
	c, err := client.Dial(srv.Addr(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if _, err := c.ApplySchema(context.Background(), map[string]string{"bench.proto": benchProto}, client.SchemaOptions{}); err != nil {
		b.Fatal(err)
	}
	return srv, c
}

// loadBenchItems inserts total bench.Item records in batches of 1,000.
func loadBenchItems(b *testing.B, c *client.Client, total int) {
	b.Helper()
	st, err := c.API().Insert(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for id := 0; id < total; id += 1000 {
		recs := make([]*anypb.Any, 0, 1000)
		for i := id; i < min(id+1000, total); i++ {
			recs = append(recs, &anypb.Any{TypeUrl: "type.googleapis.com/bench.Item", Value: benchItem(nil, int64(i))})
		}
		if err := st.Send(&pb.WriteRequest{Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := st.CloseAndRecv(); err != nil {
		b.Fatal(err)
	}
}
