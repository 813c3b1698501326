package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/protobase/protobase/client"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// oneOpCallers is how many goroutines call at once in BenchmarkOneOp, each
// on a connection of its own, as a load generator's connections do.
// PROTOBASE_BENCH_CALLERS overrides it.
func oneOpCallers() int {
	if s := os.Getenv("PROTOBASE_BENCH_CALLERS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 16
}

// BenchmarkOneOp measures the one-operation-at-a-time read paths, each
// beside its ceiling on the same server in one run, from oneOpCallers
// goroutines that each wait for an answer before they ask again:
//
//   - health: a unary health check, the least a unary call costs;
//   - get, query: a unary Get and a unary Query of one record by primary
//     key, through the Go client as an application calls them;
//   - search1: one primary-key query per request on a long-lived Search
//     stream per caller, through the client's Search (Query, then All);
//   - search1-raw: the same on the generated stream, one Send and one Recv;
//   - echo1: Lab.Echo at batch 1 on the generated stream, the transport's
//     ceiling for search1-raw (the lab's batching experiment's "transport");
//   - get-streams-open: get while 64 idle Search streams are open.
//
// Compare the ops/s of a path with its ceiling's in the same run (go test
// -count alternates them); allocs/op and cpu-ns/op count client and server
// together, since both run in this process.
func BenchmarkOneOp(b *testing.B) {
	total := min(readBenchRecords(), 100_000)
	callers := oneOpCallers()
	srv, c := benchServerConfig(b, server.Config{NoSync: true, Lab: true})
	loadBenchItems(b, c, total)
	if err := server.Compact(context.Background(), srv); err != nil {
		b.Fatal(err)
	}
	warmRecordCache(b, c, total)
	conns := make([]*client.Client, callers)
	for i := range conns {
		cc, err := client.Dial(srv.Addr())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cc.Close() })
		conns[i] = cc
	}
	ops := []struct {
		name string
		op   func(b *testing.B, c *client.Client, rng *rand.Rand) func() error
	}{
		{"health", oneOpHealth},
		{"get", oneOpGet(total)},
		{"get-raw", oneOpGetRaw(total)},
		{"query", oneOpQuery(total)},
		{"search1", oneOpSearch(total)},
		{"search1-raw", oneOpStream(total, false)},
		{"echo1", oneOpStream(total, true)},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) { runOneOp(b, conns, o.op) })
	}
	// get with 64 idle Search streams open meanwhile, as an application
	// keeps its streams open: each holds a server goroutine for its life.
	b.Run("get-streams-open", func(b *testing.B) {
		holdSearches(b, conns[0], 64)
		runOneOp(b, conns, oneOpGet(total))
	})
}

// holdSearches opens n Search streams on c that send nothing, closed when
// b ends.
func holdSearches(b *testing.B, c *client.Client, n int) {
	b.Helper()
	// Not b.Context(): that ends before the cleanups close the streams.
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for range n {
		s, err := c.NewSearch(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := s.Close(); err != nil {
				b.Error(err)
			}
		})
	}
}

// warmRecordCache looks every record up once, in Search requests of
// 1,000 lone-key queries, so that the hot-record cache holds them all, as
// it holds an application's hot records once it has run a while.
func warmRecordCache(b *testing.B, c *client.Client, total int) {
	s, err := c.NewSearch(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	for id := 0; id < total; id += 1000 {
		qs := make([]*pb.Query, 0, 1000)
		for i := id; i < min(id+1000, total); i++ {
			qs = append(qs, pkQuery(int64(i)))
		}
		rs, err := s.Batch(qs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if recs, err := r.All(); err != nil || len(recs) != 1 {
				b.Fatalf("warm-up lookup: %d records, %v", len(recs), err)
			}
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

// runOneOp runs one caller per connection, each making the operation
// newOp returns until the callers made b.N together.
func runOneOp(b *testing.B, conns []*client.Client, newOp func(*testing.B, *client.Client, *rand.Rand) func() error) {
	ops := make([]func() error, len(conns))
	for i, c := range conns {
		ops[i] = newOp(b, c, rand.New(rand.NewPCG(uint64(i), 38)))
	}
	// Warm-up: every connection and stream is open and has answered.
	for _, op := range ops {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	errs := make(chan error, len(ops))
	for _, op := range ops {
		go func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range ops {
		if err := <-errs; err != nil {
			b.Error(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func oneOpHealth(b *testing.B, c *client.Client, _ *rand.Rand) func() error {
	h := healthpb.NewHealthClient(c.Conn())
	ctx := b.Context()
	req := &healthpb.HealthCheckRequest{}
	return func() error {
		resp, err := h.Check(ctx, req)
		if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			err = fmt.Errorf("health %v", resp.GetStatus())
		}
		return err
	}
}

func oneOpGet(total int) func(*testing.B, *client.Client, *rand.Rand) func() error {
	return func(b *testing.B, c *client.Client, rng *rand.Rand) func() error {
		ctx := b.Context()
		return func() error {
			recs, err := c.Get(ctx, "bench.Item", rng.Int64N(int64(total)))
			if err == nil && (len(recs) != 1 || recs[0] == nil) {
				err = fmt.Errorf("get returned %v", recs)
			}
			return err
		}
	}
}

// oneOpGetRaw is get on the generated client with requests built before
// the clock starts: what is left is the server's and gRPC's part.
func oneOpGetRaw(total int) func(*testing.B, *client.Client, *rand.Rand) func() error {
	return func(b *testing.B, c *client.Client, rng *rand.Rand) func() error {
		ctx := b.Context()
		reqs := make([]*pb.GetRequest, 1024)
		for i := range reqs {
			reqs[i] = &pb.GetRequest{Type: "bench.Item", Keys: []*structpb.Value{structpb.NewNumberValue(float64(rng.Int64N(int64(total))))}}
		}
		n := 0
		return func() error {
			n++
			resp, err := c.API().Get(ctx, reqs[n%len(reqs)])
			if err == nil && len(resp.GetRecords()) != 1 {
				err = fmt.Errorf("get returned %d records", len(resp.GetRecords()))
			}
			return err
		}
	}
}

func oneOpQuery(total int) func(*testing.B, *client.Client, *rand.Rand) func() error {
	return func(b *testing.B, c *client.Client, rng *rand.Rand) func() error {
		ctx := b.Context()
		return func() error {
			p, err := c.Query(ctx, pkQuery(rng.Int64N(int64(total))), 0, "")
			if err == nil && len(p.Records) != 1 {
				err = fmt.Errorf("query returned %d records", len(p.Records))
			}
			return err
		}
	}
}

func oneOpSearch(total int) func(*testing.B, *client.Client, *rand.Rand) func() error {
	return func(b *testing.B, c *client.Client, rng *rand.Rand) func() error {
		s, err := c.NewSearch(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return func() error {
			res, err := s.Query(pkQuery(rng.Int64N(int64(total))))
			if err != nil {
				return err
			}
			recs, err := res.All()
			if err == nil && len(recs) != 1 {
				err = fmt.Errorf("search returned %d records", len(recs))
			}
			return err
		}
	}
}

// oneOpStream sends one primary-key query per request on the generated
// stream, to Search or to Lab.Echo, and reads until it is done.
func oneOpStream(total int, echo bool) func(*testing.B, *client.Client, *rand.Rand) func() error {
	return func(b *testing.B, c *client.Client, rng *rand.Rand) func() error {
		ctx, cancel := context.WithCancel(b.Context())
		b.Cleanup(cancel)
		var st grpc.BidiStreamingClient[pb.SearchRequest, pb.SearchResponse]
		var err error
		if echo {
			st, err = labv1.NewLabClient(c.Conn()).Echo(ctx)
		} else {
			st, err = c.API().Search(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		reqs := make([]*pb.SearchRequest, 1024)
		for i := range reqs {
			reqs[i] = &pb.SearchRequest{Queries: []*pb.Query{pkQuery(rng.Int64N(int64(total)))}}
		}
		n := 0
		var resp pb.SearchResponse
		return func() error {
			n++
			if err := st.Send(reqs[n%len(reqs)]); err != nil {
				return err
			}
			found := 0
			for {
				if err := st.RecvMsg(&resp); err != nil {
					return err
				}
				if len(resp.GetErrors()) > 0 {
					return fmt.Errorf("query: %s", resp.GetErrors()[0].GetMessage())
				}
				for _, rb := range resp.GetResults() {
					found += len(rb.GetRecords())
				}
				if len(resp.GetDone()) > 0 {
					break
				}
			}
			if found != 1 {
				return fmt.Errorf("search found %d records", found)
			}
			return nil
		}
	}
}
