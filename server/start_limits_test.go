package server_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/server"
)

// A small receive limit (--max-message-bytes) bounds requests only: the
// schema, scans and queries still answer with larger messages.
func TestReceiveLimitDoesNotCapResponses(t *testing.T) {
	ts := startServer(t, server.Config{MaxMessageBytes: 2000})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	name := strings.Repeat("n", 1500)
	for i := range 4 {
		ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d", "name": %q}`, i, i, name))})
	}
	resp, err := ts.C.GetSchema(t.Context())
	if err != nil {
		t.Fatalf("GetSchema under a 2000-byte receive limit: %v", err)
	}
	if len(resp.Types) != 2 {
		t.Fatalf("types: %v", resp.Types)
	}
	q, err := ts.C.API().Query(t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "shop.User"}})
	if err != nil || len(q.Records) != 4 {
		t.Fatalf("query of 4 records of 1.5 KB: %v, %v", len(q.GetRecords()), err)
	}
	// Requests are still bounded.
	big := ts.Rec("shop.User", `{"id": 9, "name": "`+strings.Repeat("n", 3000)+`"}`)
	if _, err := ts.Write(insert, []*anypb.Any{big}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("insert over the receive limit: %v", err)
	}
}

// Health answers for each gRPC service by name, not only for the server
// as a whole (""), and Stop turns them NOT_SERVING.
func TestHealthPerService(t *testing.T) {
	ts := startServer(t, server.Config{Lab: true})
	hc := healthpb.NewHealthClient(ts.C.Conn())
	for _, svc := range []string{"", pbgrpc.Protobase_ServiceDesc.ServiceName, "protobase.lab.v1.Lab"} {
		resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q: %v %v", svc, resp, err)
		}
	}
	if _, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Fatalf("health of an unknown service: %v", err)
	}

	conn, err := grpc.NewClient(ts.Srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wctx, wcancel := context.WithCancel(t.Context())
	defer wcancel()
	watch, err := healthpb.NewHealthClient(conn).Watch(wctx, &healthpb.HealthCheckRequest{Service: pbgrpc.Protobase_ServiceDesc.ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch before Stop: %v %v", h, err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- ts.Srv.Stop() }()
	if h, err := watch.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch after Stop: %v %v", h, err)
	}
	wcancel() // the watch is a stream in flight: Stop waits for it
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// A start that fails on an address in use leaves its data directory as it
// was: no store, no preallocated WAL.
func TestFailedStartLeavesDataDir(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := busy.Addr().String()

	for _, tc := range []struct {
		name string
		cfg  server.Config
	}{
		{"grpc", server.Config{GRPCAddr: inUse}},
		{"metrics", server.Config{GRPCAddr: "127.0.0.1:0", MetricsAddr: inUse}},
		{"http", server.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: inUse}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			empty := t.TempDir()
			missing := filepath.Join(t.TempDir(), "data")
			for _, dir := range []string{empty, missing} {
				cfg := tc.cfg
				cfg.DataDir = dir
				if _, err := server.Start(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "listen") {
					t.Fatalf("start on %s in use: %v", inUse, err)
				}
			}
			if ents, err := os.ReadDir(empty); err != nil || len(ents) != 0 {
				t.Fatalf("empty data dir after a failed start: %v %v", ents, err)
			}
			if _, err := os.Stat(missing); !os.IsNotExist(err) {
				t.Fatalf("missing data dir after a failed start: %v", err)
			}
		})
	}

	// A directory in use keeps its store: the failed start does not touch it.
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.Stop()
	ts.C = nil
	if _, err := server.Start(t.Context(), server.Config{DataDir: ts.Cfg.DataDir, GRPCAddr: "127.0.0.1:0", HTTPAddr: inUse}); err == nil {
		t.Fatal("start with REST on an address in use")
	}
	ts = startServer(t, server.Config{DataDir: ts.Cfg.DataDir})
	if resp, err := ts.C.GetSchema(t.Context()); err != nil || len(resp.Types) != 2 {
		t.Fatalf("schema after a failed start: %v %v", resp, err)
	}
}

// GetSchema's descriptors hold the user's files and what they use, not
// descriptor.proto (41 KB) for the record option; records still decode.
func TestGetSchemaDescriptorsAreSmall(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	resp, err := ts.C.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(resp.Descriptors); len(resp.Descriptors.File) != 1 || n > 2000 {
		t.Fatalf("descriptors of shop.proto: %d files, %d bytes", len(resp.Descriptors.File), n)
	}
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a"}`)})
	if n := ts.Count("shop.User"); n != 1 {
		t.Fatalf("users: %d", n)
	}
}
