package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// readBenchRecords is the data set of the read benchmarks: ~100-byte
// bench.Item records with one secondary index on name (10 records share a
// name). PROTOBASE_BENCH_RECORDS overrides it for quick runs.
func readBenchRecords() int {
	if s := os.Getenv("PROTOBASE_BENCH_RECORDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 1_000_000
}

// BenchmarkRead measures every read path over gRPC against one server
// loaded once with readBenchRecords records: Search primary-key lookups by
// batch size (alternating send and receive, as seed 000 measured),
// secondary-index range queries, and full Scans by parallelism.
func BenchmarkRead(b *testing.B) {
	total := readBenchRecords()
	srv, c := benchServer(b, false)
	ctx := context.Background()
	st, err := c.API().Insert(ctx)
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
	// Reads should meet the data as it rests after a bulk load settles:
	// compacted into one sorted run, with no compaction competing.
	if err := server.Compact(ctx, srv); err != nil {
		b.Fatal(err)
	}

	for _, batch := range []int{1, 10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("search-pk/batch=%d", batch), func(b *testing.B) { benchSearchPK(b, c, total, batch) })
	}
	b.Run("query-pk/unary", func(b *testing.B) { benchQueryPK(b, c, total) })
	b.Run("search-index-range/records=1000/client=decode", func(b *testing.B) { benchIndexRange(b, c, total) })
	b.Run("search-index-range/records=1000/client=count", func(b *testing.B) { benchIndexRangeCount(b, c, total) })
	b.Run("pages/size=1000", func(b *testing.B) { benchPages(b, c, total) })
	for _, par := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("scan/parallelism=%d", par), func(b *testing.B) { benchScan(b, c, total, par) })
	}
}

func pkQuery(id int64) *pb.Query {
	return &pb.Query{Type: "bench.Item", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
		Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: id}},
	}}}}
}

// benchSearchPK sends a batch of random primary-key lookups, waits for all
// of them to finish, and repeats: b.N counts lookups.
func benchSearchPK(b *testing.B, c *client.Client, total, batch int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := c.API().Search(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, uint64(batch)))
	// The requests are built before the clock starts and reused: the
	// benchmark measures the server and the transport, not query building.
	reqs := make([]*pb.SearchRequest, 16)
	for i := range reqs {
		qs := make([]*pb.Query, batch)
		for j := range qs {
			qs[j] = pkQuery(rng.Int64N(int64(total)))
		}
		reqs[i] = &pb.SearchRequest{Queries: qs}
	}
	b.ReportAllocs()
	b.ResetTimer()
	found := 0
	for n, r := 0, 0; n < b.N; n, r = n+batch, r+1 {
		if err := st.Send(reqs[r%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		for done := 0; done < batch; {
			resp, err := st.Recv()
			if err != nil {
				b.Fatal(err)
			}
			if len(resp.GetErrors()) > 0 {
				b.Fatal(resp.GetErrors()[0].GetMessage())
			}
			for _, rb := range resp.GetResults() {
				found += len(rb.GetRecords())
			}
			done += len(resp.GetDone())
		}
	}
	b.StopTimer()
	if err := st.CloseSend(); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		b.Fatalf("stream end: %v", err)
	}
	if found == 0 {
		b.Fatal("no lookup found its record")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
	b.ReportMetric(0, "ns/op")
}

// rangeQuery is a secondary-index range query of the 100 names from
// name lo on: 1,000 records on the full data set, scattered over it.
func rangeQuery(lo int, explain bool) *pb.Query {
	return &pb.Query{Type: "bench.Item", Explain: explain, Where: &pb.Expr{Expr: &pb.Expr_And{And: &pb.ExprList{Exprs: []*pb.Expr{
		{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "name", Op: pb.Op_OP_GE, Value: &pb.Value{Kind: &pb.Value_String_{String_: fmt.Sprintf("name-%012d", lo)}}}}},
		{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "name", Op: pb.Op_OP_LT, Value: &pb.Value{Kind: &pb.Value_String_{String_: fmt.Sprintf("name-%012d", lo+100)}}}}},
	}}}}}
}

// benchIndexRange runs secondary-index range queries (rangeQuery) one
// after another on a Search stream of the Go client, which decodes every
// record into an Any: b.N counts records.
func benchIndexRange(b *testing.B, c *client.Client, total int) {
	names := min(total, 100_000)
	s, err := c.NewSearch(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(2, 2))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	read, plan := 0, ""
	for read < b.N {
		res, err := s.Query(rangeQuery(rng.IntN(max(1, names-100)), read == 0))
		if err != nil {
			b.Fatal(err)
		}
		recs, err := res.All()
		if err != nil {
			b.Fatal(err)
		}
		if p := res.Plan(); p != nil {
			plan = p.GetAccess()
		}
		if len(recs) == 0 {
			b.Fatal("empty range")
		}
		read += len(recs)
	}
	b.StopTimer()
	if plan != "index_range" {
		b.Fatalf("plan %q, want index_range", plan)
	}
	reportRange(b, read, cpu0)
}

// benchIndexRangeCount is benchIndexRange with a client that counts the
// records of each response on the wire and decodes none (countCodec):
// what is left is the server's and the transport's cost, the rate a
// client that hands the bytes on, or decodes lazily, sees.
func benchIndexRangeCount(b *testing.B, c *client.Client, total int) {
	names := min(total, 100_000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := c.API().Search(ctx, grpc.ForceCodecV2(countCodec{}))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 2))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	read := 0
	var resp countedResponse
	for id := uint64(0); read < b.N; id++ {
		req := &pb.SearchRequest{Queries: []*pb.Query{rangeQuery(rng.IntN(max(1, names-100)), false)}}
		if err := st.SendMsg(req); err != nil {
			b.Fatal(err)
		}
		n := 0
		for done := false; !done; {
			if err := st.RecvMsg(&resp); err != nil {
				b.Fatal(err)
			}
			if resp.failed != "" {
				b.Fatal(resp.failed)
			}
			n += resp.records
			done = resp.done > 0
		}
		if n == 0 {
			b.Fatal("empty range")
		}
		read += n
	}
	b.StopTimer()
	reportRange(b, read, cpu0)
}

// reportRange reports records/s and the process's CPU time per record
// (client and server together), which holds still on a busy machine.
func reportRange(b *testing.B, read int, cpu0 time.Duration) {
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(read), "cpu-ns/record")
	b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}

// countedResponse is a SearchResponse as countCodec reads it: the records
// it carries, the queries it finishes and the first error's message.
type countedResponse struct {
	records, done int
	failed        string
}

// countCodec is protobuf for the requests and, for the responses, a walk
// over the wire bytes that counts records without decoding them.
type countCodec struct{}

func (countCodec) Name() string { return "proto" }

func (countCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (countCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*countedResponse)
	if !ok {
		return fmt.Errorf("countCodec: cannot decode into %T", v)
	}
	*r = countedResponse{}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	err := walkFields(buf.ReadOnlyData(), func(num protowire.Number, sub []byte) error {
		switch num {
		case 1: // results: count the batch's records (field 2)
			return walkFields(sub, func(num protowire.Number, _ []byte) error {
				if num == 2 {
					r.records++
				}
				return nil
			})
		case 2:
			r.done++
		case 3:
			var qe pb.QueryError
			if err := proto.Unmarshal(sub, &qe); err != nil {
				return err
			}
			r.failed = qe.GetMessage()
		}
		return nil
	})
	return err
}

// walkFields calls fn with the number and, for length-delimited fields,
// the bytes of each field of the message b.
func walkFields(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var sub []byte
		if typ == protowire.BytesType {
			sub, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, sub); err != nil {
			return err
		}
	}
	return nil
}

// benchScan reads the whole data set with one Scan per iteration.
func benchScan(b *testing.B, c *client.Client, total, par int) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for range b.N {
		sc := c.Scan(context.Background(), &pb.Query{Type: "bench.Item"}, client.ScanOptions{Parallelism: uint32(par)})
		n := 0
		for sc.Next() {
			n++
		}
		if err := sc.Err(); err != nil {
			b.Fatal(err)
		}
		if n != total {
			b.Fatalf("scan read %d records, want %d", n, total)
		}
	}
	b.StopTimer()
	// CPU time per scan (client and server together) holds still on a
	// machine that other work keeps busy, where seconds per scan do not.
	b.ReportMetric((processCPU(b)-cpu0).Seconds()/float64(b.N), "cpu-s/scan")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/scan")
	b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}

// benchQueryPK makes one unary Query per primary-key lookup, one after
// another: the request/response cost a hop pays per record.
func benchQueryPK(b *testing.B, c *client.Client, total int) {
	rng := rand.New(rand.NewPCG(3, 3))
	reqs := make([]*pb.QueryRequest, 1024)
	for i := range reqs {
		reqs[i] = &pb.QueryRequest{Query: pkQuery(rng.Int64N(int64(total)))}
	}
	api := c.API()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		resp, err := api.Query(ctx, reqs[i%len(reqs)])
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.GetRecords()) != 1 {
			b.Fatalf("lookup returned %d records", len(resp.GetRecords()))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
	b.ReportMetric(0, "ns/op")
}

// benchPages fetches every record whose email contains "@" (all of them),
// newest id first, in Query pages of 1000 resumed by continuation tokens:
// the fetch experiment's paged method. b.N counts records.
func benchPages(b *testing.B, c *client.Client, total int) {
	q := &pb.Query{Type: "bench.Item", Order: &pb.Order{Descending: true}, Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
		Field: "email", Op: pb.Op_OP_CONTAINS, Value: &pb.Value{Kind: &pb.Value_String_{String_: "@"}}}}}}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	read := 0
	for read < b.N {
		err := c.Pages(context.Background(), q, 1000, func(p *client.Page) bool {
			read += len(p.Records)
			return read < b.N
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(read), "cpu-ns/record")
	b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
	_ = total
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
