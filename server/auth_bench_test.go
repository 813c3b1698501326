package server_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/server"
)

// authModes are the configurations BenchmarkAuth compares: no
// authentication, an admin key (every type), and a write key scoped to the
// benchmark's package (a scope check per record and per query).
var authModes = []string{"off", "key", "scoped-key"}

// authBenchServer starts a server in mode and returns a client with the
// mode's key.
func authBenchServer(b *testing.B, mode string, sync bool) (*server.Server, *client.Client) {
	b.Helper()
	cfg := server.Config{DataDir: b.TempDir(), GRPCAddr: "127.0.0.1:0", NoSync: !sync}
	var opts []client.Option
	if mode != "off" {
		admin, _ := auth.GenerateKey()
		cfg.Auth, cfg.AdminKey = true, admin
		opts = append(opts, client.WithAPIKey(admin))
	}
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	if mode == "scoped-key" {
		key, _, err := srv.Keys().Create(nil, "bench", auth.RoleSchema, []string{"bench.*"})
		if err != nil {
			b.Fatal(err)
		}
		opts = []client.Option{client.WithAPIKey(key)}
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

// BenchmarkAuth measures what API keys cost: Search primary-key lookups at
// batch 1 and 1,000 and durable ingest at batch 1,000, with authentication
// off and on. A stream is authenticated once; each message then costs an
// atomic load (revocation) and, for a scoped key, a scope check per record
// or query. PROTOBASE_BENCH_AUTH_RECORDS sizes the search data set
// (default 100,000).
func BenchmarkAuth(b *testing.B) {
	total := 100_000
	if n, err := strconv.Atoi(os.Getenv("PROTOBASE_BENCH_AUTH_RECORDS")); err == nil && n > 0 {
		total = n
	}
	for _, mode := range authModes {
		b.Run("ingest/batch=1000/sync=true/auth="+mode, func(b *testing.B) {
			_, c := authBenchServer(b, mode, true)
			batches := benchBatches(1000, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			st, err := c.API().Insert(context.Background())
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
			reportRecords(b)
		})
	}
	// Loaded by the parent: a sub-benchmark's function runs once per b.N
	// tried, and its cleanups with it. The modes alternate within each
	// batch size, so that a change in the machine's load over the run
	// does not fall on one mode.
	clients := map[string]*client.Client{}
	for _, mode := range authModes {
		clients[mode] = loadAuthBench(b, mode, total)
	}
	for _, batch := range []int{1, 1000} {
		for _, mode := range authModes {
			b.Run(fmt.Sprintf("search-pk/batch=%d/auth=%s", batch, mode), func(b *testing.B) {
				benchSearchPK(b, clients[mode], total, batch)
			})
		}
	}
}

// loadAuthBench starts a server in mode holding total records.
func loadAuthBench(b *testing.B, mode string, total int) *client.Client {
	_, c := authBenchServer(b, mode, false)
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
	return c
}
