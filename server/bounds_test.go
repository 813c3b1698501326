package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/protobase/protobase/client"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// Memory bounds with large records: what the server holds, in real bytes,
// while clients send and ask for records of tens of MiB. Each test checks
// the bound docs/limits.md gives for its configuration.

// blobProto is a record type of large records.
const blobProto = `syntax = "proto3";
package big;
import "protobase/v1/options.proto";
message Blob {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  bytes data = 2;
}
`

const blobURL = "type.googleapis.com/big.Blob"

// blob encodes a big.Blob of id whose data is size bytes.
func blob(id int64, size int) *anypb.Any {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = append(b, bytes.Repeat([]byte{byte(id)}, size)...)
	return &anypb.Any{TypeUrl: blobURL, Value: b}
}

// insertBlobs stores n blobs of size bytes (ids 1..n) through c, one
// batch each.
func insertBlobs(t *testing.T, c *client.Client, n, size int) {
	t.Helper()
	if _, err := c.ApplySchema(t.Context(), map[string]string{"big.proto": blobProto, "shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		w, err := c.API().Insert(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Send(&pb.WriteRequest{Records: []*anypb.Any{blob(int64(i), size)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.CloseAndRecv(); err != nil {
			t.Fatalf("insert blob %d: %v", i, err)
		}
	}
}

// nonReadingConn is a client with small windows that will never read:
// little of what the server sends can sit in this process.
func nonReadingConn(t *testing.T, addr string) pbgrpc.ProtobaseClient {
	t.Helper()
	return pbgrpc.NewProtobaseClient(nonReadingClientConn(t, addr))
}

// nonReadingClientConn is nonReadingConn's connection, closed when the
// test ends (or before, by the test).
func nonReadingClientConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Search, Scan, Watch and Export streams of 30 MiB records whose clients
// never read hold what the result budget allows, not a response (or several)
// per stream: each response holds its real size of the budget, from before
// its records are copied in until gRPC has written it.
func TestBoundsLargeResults(t *testing.T) {
	skipLargeInRaceRun(t)
	const streams, budget, recSize = 10, 64 * mib, 30 << 20
	ts := startServer(t, server.Config{MaxResultBufferBytes: budget, CacheBytes: 8 * mib, MemTableBytes: 16 * mib})
	insertBlobs(t, ts.C, 4, recSize)
	// The blobs' batches (and their change-log entries) leave memory
	// when flushed: before the heap is measured, not while.
	if err := server.Flush(ts.Srv); err != nil {
		t.Fatal(err)
	}
	api := nonReadingConn(t, ts.Srv.Addr())
	open := map[string]func(ctx context.Context) error{
		"search": func(ctx context.Context) error {
			st, err := api.Search(ctx)
			if err == nil {
				err = st.Send(&pb.SearchRequest{Queries: []*pb.Query{{Type: "big.Blob"}}})
			}
			return err
		},
		"scan": func(ctx context.Context) error {
			_, err := api.Scan(ctx, &pb.ScanRequest{Query: &pb.Query{Type: "big.Blob"}, Parallelism: 4})
			return err
		},
		"watch": func(ctx context.Context) error {
			_, err := api.Watch(ctx, &pb.WatchRequest{Types: []string{"big.Blob"}, OldRecords: true,
				Start: &pb.WatchStart{Start: &pb.WatchStart_Oldest{Oldest: true}}})
			return err
		},
		"export": func(ctx context.Context) error {
			_, err := api.Export(ctx, &pb.ExportRequest{Types: []string{"big.Blob"}})
			return err
		},
	}
	for i, kind := range []string{"search", "scan", "watch", "export"} {
		t.Run(kind, func(t *testing.T) {
			heapInuse()
			base := heapInuse()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for range streams {
				if err := open[kind](ctx); err != nil {
					t.Fatal(err)
				}
			}
			held := heapSettled(base, budget)
			t.Logf("%d non-reading %s streams of 30 MiB records: heap +%d MiB (result budget %d MiB)", streams, kind, held/mib, budget/mib)
			// The race detector keeps more alive (sync.Pool drops buffers
			// at random under it): its run checks the code path, not the
			// figures.
			if bound := uint64(budget + streams*2*mib + 32*mib); !raceEnabled && held > bound {
				t.Fatalf("non-reading %s streams hold %d MiB, want at most %d MiB (the budget and 2 MiB a stream)", kind, held/mib, bound/mib)
			}
			ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%s@x"}`, 1+i, kind))})
			cancel()
			waitHeapBelow(t, base+32*mib)
		})
	}
	// The budget came back whole: a reading client reads every record.
	recs, err := ts.C.Get(t.Context(), "big.Blob", 1, 2, 3, 4)
	if err != nil || len(recs) != 4 || recs[3] == nil || len(recs[3].Value) < recSize {
		t.Fatalf("get after the streams: %d records, %v", len(recs), err)
	}
}

// A Get of 400 keys naming four 30 MiB records a hundred times each made
// the server build a 12 GiB answer and die ("fatal error: out of memory").
// The answer is bounded in bytes as it is built: it holds what fits and
// names the keys left to ask again. The server runs in a child process
// whose address space is limited, so that running out of memory ends it.
// A Query page of such records is cut short with a token in the same way,
// where it used to fail with "trying to send message larger than max".
func TestBoundsLargeAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	const recSize = 30 << 20
	child, addr := startChild(t, childLimits{AddressSpace: 6 << 30, CacheBytes: 16 * mib, MemTableBytes: 16 * mib})
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	insertBlobs(t, c, 4, recSize)

	req := &pb.GetRequest{Type: "big.Blob"}
	for i := range 400 {
		req.Keys = append(req.Keys, structpb.NewNumberValue(float64(1+i%4)))
	}
	resp, err := c.API().Get(t.Context(), req, grpc.MaxCallRecvMsgSize(128<<20))
	if err != nil {
		t.Fatalf("get of 400 keys of 30 MiB records: %v (server alive: %v)", err, alive(child))
	}
	answered := len(resp.Records)
	t.Logf("get of 400 keys: %d records answered, %d keys left to ask again", answered, len(resp.Unanswered))
	if answered == 0 || answered > 2 || answered+len(resp.Unanswered) != 400 || len(resp.Missing) != 0 {
		t.Fatalf("get answered %d records, %d unanswered, %d missing: want 1 or 2 answered and the rest unanswered",
			answered, len(resp.Unanswered), len(resp.Missing))
	}
	for _, r := range resp.Records {
		if len(r.Value) < recSize {
			t.Fatalf("a record of %d bytes answered", len(r.Value))
		}
	}

	// Pages of the same records end early, each with a token, and
	// together hold every record once.
	var ids []byte
	token := ""
	for page := 0; page < 8; page++ {
		q, err := c.API().Query(t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "big.Blob"}, PageToken: token}, grpc.MaxCallRecvMsgSize(128<<20))
		if err != nil {
			t.Fatalf("query page %d: %v (server alive: %v)", page, err, alive(child))
		}
		for _, r := range q.Records {
			ids = append(ids, r.Value[len(r.Value)-1])
		}
		if token = q.NextPageToken; token == "" {
			break
		}
	}
	if string(ids) != "\x01\x02\x03\x04" {
		t.Fatalf("pages held the records %v, want 1 2 3 4 once each", ids)
	}
}

// Write streams sending batches at the message limit, with
// acknowledgements, and Insert streams beside them (each reading one
// request ahead too), keep the server within the memory docs/limits.md
// adds up for its configuration: every decoded request and every storage
// batch not yet durable counts against the write budget, requests
// waiting for it against as much again, and the Go runtime's soft limit
// keeps the heap from doubling. Meanwhile another client's queries are
// answered. Under the race detector (the child server is this test
// binary, so it runs under the detector too) the run checks the path, not
// the figure: the detector's own memory comes on top of the server's.
func TestBoundsWriteStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	const (
		streams, batches = 16, 3
		recs, recSize    = 500, 16 << 10 // a batch of 8 MiB
		inflight         = 64 * mib
		recv             = 160 * mib // room for every stream's message at once
	)
	l := childLimits{MaxMessageBytes: 9 * mib, MaxInflightBytes: inflight, MaxReceiveBufferBytes: recv,
		MaxReceiveBytesPerConn: 18 * mib, CacheBytes: 16 * mib, MemTableBytes: 16 * mib, RecordCacheBytes: -1}
	// docs/limits.md: the receive budget, twice (partial messages, and
	// decoded requests waiting for the write budget) + 5 × the write
	// budget + block cache + 6 memtables (the result budget is idle
	// here). The Go runtime's soft limit is that total less what Pebble
	// holds outside the Go heap (the cache and the memtables), as the
	// server derives it from a machine's memory.
	total := 2*recv + 5*inflight + l.CacheBytes + 6*l.MemTableBytes
	l.GoMemoryLimit = total - l.CacheBytes - 6*l.MemTableBytes
	child, addr := startChild(t, l)
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ApplySchema(t.Context(), map[string]string{"big.proto": blobProto, "shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	base, err := peakRSS(child)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var queries sync.WaitGroup
	queries.Add(1)
	var queryErr error
	go func() { // another client, querying throughout
		defer queries.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := c.API().Query(ctx, &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}})
			cancel()
			if err != nil {
				queryErr = err
				return
			}
		}
	}()
	errs := make(chan error, streams)
	for s := range streams {
		go func() { errs <- writeBlobs(addr, int64(s*batches*recs), batches, recs, recSize, s%2 == 1) }()
	}
	var failed []error
	for range streams {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	close(stop)
	queries.Wait()
	peak, err := peakRSS(child)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d streams × %d batches of %.1f MiB: peak RSS %d MiB, %d MiB at start, documented total %d MiB",
		streams, batches, float64(recs*recSize)/mib, peak/mib, base/mib, total/mib)
	for _, err := range failed {
		t.Errorf("a write stream failed: %v", err)
	}
	if queryErr != nil {
		t.Errorf("another client's query failed meanwhile: %v", queryErr)
	}
	if bound := base + uint64(total) + 64*mib; !raceEnabled && peak > bound {
		t.Fatalf("peak RSS %d MiB, over the documented %d MiB (and %d MiB at start)", peak/mib, total/mib, base/mib)
	}
}

// writeBlobs sends batches of n blobs of size bytes (ids from first) on
// a Write stream of its own connection, each acknowledged, or with insert
// on an Insert stream.
func writeBlobs(addr string, first int64, batches, n, size int, insert bool) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if insert {
		return insertStreamBlobs(ctx, pbgrpc.NewProtobaseClient(conn), first, batches, n, size)
	}
	st, err := pbgrpc.NewProtobaseClient(conn).Write(ctx)
	if err != nil {
		return err
	}
	for b := range batches {
		req := &pb.WriteStreamRequest{Op: pb.WriteOp_WRITE_OP_INSERT, Ack: true}
		for i := range n {
			req.Records = append(req.Records, blob(first+int64(b*n+i), size))
		}
		if err := st.Send(req); err != nil {
			break // the status says why
		}
	}
	_ = st.CloseSend()
	for {
		if _, err := st.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// insertStreamBlobs is writeBlobs on an Insert stream.
func insertStreamBlobs(ctx context.Context, api pbgrpc.ProtobaseClient, first int64, batches, n, size int) error {
	st, err := api.Insert(ctx)
	if err != nil {
		return err
	}
	for b := range batches {
		req := &pb.WriteRequest{}
		for i := range n {
			req.Records = append(req.Records, blob(first+int64(b*n+i), size))
		}
		if err := st.Send(req); err != nil {
			break // the status says why
		}
	}
	_, err = st.CloseAndRecv()
	return err
}

// Lab.Echo answers a request in responses of at most lab.EchoBatch
// queries, and refuses a request of more queries than the server takes
// in one Search request. One 8 MB request of empty queries made a 663 MB
// response before.
func TestBoundsEcho(t *testing.T) {
	ts := startServer(t, server.Config{Lab: true, MaxSearchQueries: 20_000})
	lab := labClient(t, ts)
	st, err := lab.Echo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	queries := func(n int) *pb.SearchRequest {
		qs := make([]*pb.Query, n)
		for i := range qs {
			qs[i] = &pb.Query{}
		}
		return &pb.SearchRequest{Queries: qs}
	}
	if err := st.Send(queries(5_000)); err != nil {
		t.Fatal(err)
	}
	answered := 0
	for answered < 5_000 {
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Done) > 1000 {
			t.Fatalf("one response answered %d queries, want at most 1000", len(resp.Done))
		}
		answered += len(resp.Done)
	}
	_ = st.Send(queries(20_001))
	for err == nil {
		_, err = st.Recv()
	}
	wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), "more than the server's limit of 20000") {
		t.Fatalf("error %v does not name the limit", err)
	}
}

// childLimits are a child server's bounds.
type childLimits = servertest.Limits

// childProc is a server running in a child process.
type childProc struct{ cmd *exec.Cmd }

// startChild runs a server with the bounds l in a child process on a new
// directory.
func startChild(t *testing.T, l childLimits) (*childProc, string) {
	t.Helper()
	cmd, addr := servertest.StartLimited(t, t.TempDir(), l)
	return &childProc{cmd}, addr
}

// peakRSS returns the child's peak resident memory.
func peakRSS(c *childProc) (uint64, error) { return servertest.PeakRSS(c.cmd) }

// alive reports whether the child still runs (not exited, nor a zombie).
func alive(c *childProc) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func labClient(t *testing.T, ts *testServer) labv1.LabClient {
	t.Helper()
	return labv1.NewLabClient(ts.C.Conn())
}
