package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/server"
)

func TestHealthAndMetrics(t *testing.T) {
	ts := startServer(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	resp, err := healthpb.NewHealthClient(ts.C.Conn()).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", resp, err)
	}
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1}`), ts.Rec("shop.User", `{"id": 2, "email": "x"}`)})

	r, err := http.Get("http://" + ts.Srv.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	for _, want := range []string{"protobase_write_records_total 2", "protobase_write_batches_total 1", `grpc_server_handled_total{grpc_code="OK",grpc_method="Insert"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// grpcurl-style reflection must describe record types applied at run time.
func TestReflectionServesRuntimeTypes(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	st, err := reflectionpb.NewServerReflectionClient(ts.C.Conn()).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
		t.Helper()
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "shop.User"}})
	fdr := resp.GetFileDescriptorResponse()
	if fdr == nil {
		t.Fatalf("no descriptor for shop.User: %v", resp)
	}
	found := false
	for _, raw := range fdr.FileDescriptorProto {
		fd := new(descriptorpb.FileDescriptorProto)
		if err := proto.Unmarshal(raw, fd); err != nil {
			t.Fatal(err)
		}
		if fd.GetName() == "shop.proto" && fd.MessageType[0].GetName() == "User" {
			found = true
		}
	}
	if !found {
		t.Fatal("reflection did not return shop.proto")
	}
	resp = ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: ""}})
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "protobase.v1.Protobase") {
		t.Fatalf("services %v", names)
	}
}

// Stop lets a write stream in flight finish its batches before closing.
func TestGracefulStopFinishesInflightStream(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := pbgrpc.NewProtobaseClient(conn)
	if _, err := api.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": shopProto}}); err != nil {
		t.Fatal(err)
	}
	st, err := api.Insert(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	recs := testschema.ShopBatch(0)
	if err := st.Send(&pb.WriteRequest{Records: recs[:100]}); err != nil {
		t.Fatal(err)
	}
	// Stop's first step turns health NOT_SERVING: a Watch opened before
	// it tells when the shutdown is under way.
	wctx, wcancel := context.WithCancel(t.Context())
	defer wcancel()
	watch, err := healthpb.NewHealthClient(conn).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before Stop: %v %v", h, err)
	}
	stopped := make(chan error)
	go func() { stopped <- srv.Stop() }()
	if h, err := watch.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health after Stop: %v %v", h, err)
	}
	wcancel() // the watch is a stream in flight too
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned with a stream in flight: %v", err)
	default:
	}
	if err := st.Send(&pb.WriteRequest{Records: recs[100:]}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.CloseAndRecv()
	if err != nil || resp.Records != 200 {
		t.Fatalf("in-flight stream: %v %v", resp, err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, server.Config{DataDir: dir})
	if n := ts.Count("shop.User"); n != 100 {
		t.Fatalf("users after graceful stop: %d", n)
	}
}

func TestStartErrors(t *testing.T) {
	if _, err := server.Start(context.Background(), server.Config{}); err == nil {
		t.Fatal("no DataDir accepted")
	}
	ts := startServer(t, server.Config{})
	_, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: ts.Srv.Addr()})
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("address in use: %v", err)
	}
	// A second server on a directory in use is refused by the store's lock.
	_, err = server.Start(context.Background(), server.Config{DataDir: ts.Cfg.DataDir, GRPCAddr: "127.0.0.1:0"})
	if err == nil {
		t.Fatal("two servers on one directory")
	}
}
