package server_test

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// collector is an in-process OTLP/gRPC trace collector that keeps the
// spans it receives.
type collector struct {
	collectorpb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *collector) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func startCollector(t testing.TB) (*collector, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, c)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return c, lis.Addr().String()
}

// With --otlp-endpoint, a write (gRPC and REST) and a search each make a
// span tree under the trace context the client sent: the call's span, its
// parent the client's, and under it the write batch with its apply
// (holding the commit wait) and its fsync, or the search's queries by
// access path, each planned on its own with its planning and store reads.
func TestTracingSpanTrees(t *testing.T) {
	col, addr := startCollector(t)
	ts := startServer(t, server.Config{OTLPEndpoint: addr, TraceSampleRatio: 1, HTTPAddr: "127.0.0.1:0"})
	ts.MustApply(map[string]string{"shop.proto": shopProto})

	const writeTrace, writeParent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	const searchTrace, searchParent = "1bf7651916cd43dd8448eb211c80319d", "c7ad6b7169203332"
	traced := func(trace, parent string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "traceparent", "00-"+trace+"-"+parent+"-01")
	}
	st, err := ts.C.API().Insert(traced(writeTrace, writeParent))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*anypb.Any
	for i := range 10 {
		recs = append(recs, ts.Rec("shop.User", `{"id": `+itoa(i+1)+`, "email": "u`+itoa(i)+`"}`))
	}
	if err := st.Send(&pb.WriteRequest{Records: recs}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	s, err := ts.C.NewSearch(traced(searchTrace, searchParent))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Batch([]*pb.Query{
		{Type: "shop.User", Where: mustParse(t, "id = 1")}, {Type: "shop.User", Where: mustParse(t, "id = 2")},
		{Type: "shop.User", Where: mustParse(t, `email = "u3"`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	lone, err := s.Query(&pb.Query{Type: "shop.User", Where: mustParse(t, `email contains "1"`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(rs, lone) {
		if _, err := r.All(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const httpTrace, httpParent = "2cf7651916cd43dd8448eb211c80319e", "d7ad6b7169203333"
	req, err := http.NewRequest(http.MethodPost, "http://"+ts.Srv.HTTPAddr()+"/v1/records:insert",
		strings.NewReader(`{"records": [{"@type": "type.googleapis.com/shop.User", "id": "99", "email": "h@x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+httpTrace+"-"+httpParent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("REST insert: %s", resp.Status)
	}
	ts.Stop() // sends the spans still buffered

	col.mu.Lock()
	defer col.mu.Unlock()
	tree := spanTree(col.spans)
	write := tree.rpc(t, writeTrace, writeParent, "protobase.v1.Protobase/Insert")
	batch := tree.child(t, write, "protobase.write_batch")
	apply := tree.child(t, batch, "protobase.apply")
	tree.child(t, apply, "protobase.commit_wait")
	tree.child(t, batch, "protobase.fsync")

	rest := tree.rpc(t, httpTrace, httpParent, "HTTP POST")
	tree.child(t, tree.child(t, rest, "protobase.write_batch"), "protobase.fsync")

	search := tree.rpc(t, searchTrace, searchParent, "protobase.v1.Protobase/Search")
	access := map[string]int64{}
	for _, q := range tree.children[string(search.GetSpanId())] {
		if q.GetName() != "protobase.query" {
			continue
		}
		var a string
		var n int64
		for _, kv := range q.GetAttributes() {
			switch kv.GetKey() {
			case "protobase.access":
				a = kv.GetValue().GetStringValue()
			case "protobase.queries":
				n = kv.GetValue().GetIntValue()
			}
		}
		access[a] += n
		if a != "pk_point" { // planned on its own: planning and store reads apart
			tree.child(t, q, "protobase.plan")
			tree.child(t, q, "protobase.read")
		}
	}
	if access["pk_point"] != 2 || access["index_range"] != 1 || access["full_scan"] != 1 {
		t.Errorf("search query spans by access path %v; want pk_point 2, index_range 1, full_scan 1", access)
	}
}

// spans indexes spans by id and by parent.
type spans struct {
	all      []*tracepb.Span
	children map[string][]*tracepb.Span
}

func spanTree(all []*tracepb.Span) spans {
	s := spans{all: all, children: map[string][]*tracepb.Span{}}
	for _, sp := range all {
		s.children[string(sp.GetParentSpanId())] = append(s.children[string(sp.GetParentSpanId())], sp)
	}
	return s
}

// rpc returns the server span of method in trace, failing unless its
// parent is the client's span parent.
func (s spans) rpc(t *testing.T, trace, parent, method string) *tracepb.Span {
	t.Helper()
	for _, sp := range s.all {
		if sp.GetName() == method && hex.EncodeToString(sp.GetTraceId()) == trace {
			if got := hex.EncodeToString(sp.GetParentSpanId()); got != parent {
				t.Fatalf("%s span's parent %s, want the client's %s", method, got, parent)
			}
			if sp.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("%s span of kind %v, want server", method, sp.GetKind())
			}
			return sp
		}
	}
	t.Fatalf("no %s span in trace %s among %d spans", method, trace, len(s.all))
	return nil
}

// child returns parent's child named name, failing unless it lies within
// its parent's time.
func (s spans) child(t *testing.T, parent *tracepb.Span, name string) *tracepb.Span {
	t.Helper()
	for _, sp := range s.children[string(parent.GetSpanId())] {
		if sp.GetName() != name {
			continue
		}
		if sp.GetStartTimeUnixNano() < parent.GetStartTimeUnixNano() || sp.GetEndTimeUnixNano() > parent.GetEndTimeUnixNano() ||
			sp.GetEndTimeUnixNano() < sp.GetStartTimeUnixNano() {
			t.Errorf("%s span [%d, %d] not within %s [%d, %d]", name, sp.GetStartTimeUnixNano(), sp.GetEndTimeUnixNano(),
				parent.GetName(), parent.GetStartTimeUnixNano(), parent.GetEndTimeUnixNano())
		}
		return sp
	}
	t.Fatalf("no %s span under %s", name, parent.GetName())
	return nil
}

// BenchmarkTracing measures what tracing configured with an endpoint
// costs when it samples nothing (--trace-sample-ratio 0, no traceparent
// sent), beside tracing off: durable ingest and Search primary-key
// lookups at batch 1,000. Run it with -count to alternate the two.
func BenchmarkTracing(b *testing.B) {
	_, addr := startCollector(b)
	for _, mode := range []string{"off", "unsampled"} {
		cfg := server.Config{}
		if mode == "unsampled" {
			cfg.OTLPEndpoint = addr
		}
		b.Run("ingest/batch=1000/sync=true/tracing="+mode, func(b *testing.B) {
			_, c := benchServerConfig(b, cfg)
			batches := benchBatches(1000, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			benchSend(b, c.API().Insert, batches)
			reportRecords(b)
		})
		b.Run("search-pk/batch=1000/tracing="+mode, func(b *testing.B) {
			_, c := benchServerConfig(b, cfg)
			const total = 100_000
			benchSend(b, c.API().Insert, benchBatches(1000, total))
			b.ResetTimer()
			benchSearchPK(b, c, total, 1000)
		})
	}
}
