package server_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/server"
)

const shopProto = testschema.Shop

// testServer is a real server on a loopback port with a real Pebble
// directory, and a client connected to it.
type testServer struct {
	t   *testing.T
	srv *server.Server
	cfg server.Config
	c   *client.Client
	// descs caches the server's descriptors by type name; apply clears
	// it. descMu guards it: tests build records from several goroutines.
	descMu sync.Mutex
	descs  map[string]protoreflect.MessageDescriptor
}

func startServer(t *testing.T, cfg server.Config) *testServer {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.GRPCAddr = "127.0.0.1:0"
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	c, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, srv: srv, cfg: cfg, c: c}
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) stop() {
	if ts.c != nil {
		ts.c.Close()
	}
	if err := ts.srv.Stop(); err != nil {
		ts.t.Errorf("stop: %v", err)
	}
}

// restart stops the server and starts a new one on the same directory.
func (ts *testServer) restart() *testServer {
	ts.t.Helper()
	ts.stop()
	return startServer(ts.t, ts.cfg)
}

func (ts *testServer) apply(files map[string]string, opts client.SchemaOptions) (*pb.ApplySchemaResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts.descMu.Lock()
	ts.descs = nil
	ts.descMu.Unlock()
	return ts.c.ApplySchema(ctx, files, opts)
}

func (ts *testServer) mustApply(files map[string]string) *pb.ApplySchemaResponse {
	ts.t.Helper()
	resp, err := ts.apply(files, client.SchemaOptions{})
	if err != nil {
		ts.t.Fatalf("apply schema: %v", err)
	}
	return resp
}

// rec builds a record of typeName from JSON, using the server's own
// descriptors (as a client of a runtime schema would).
func (ts *testServer) rec(typeName, js string) *anypb.Any {
	ts.t.Helper()
	ts.descMu.Lock()
	md, ok := ts.descs[typeName]
	ts.descMu.Unlock()
	if !ok {
		md = ts.desc(typeName) // may fail the test: not under the lock
		ts.descMu.Lock()
		if ts.descs == nil {
			ts.descs = map[string]protoreflect.MessageDescriptor{}
		}
		ts.descs[typeName] = md
		ts.descMu.Unlock()
	}
	a, err := testschema.Record(md, js)
	if err != nil {
		ts.t.Fatal(err)
	}
	return a
}

func (ts *testServer) desc(typeName string) protoreflect.MessageDescriptor {
	ts.t.Helper()
	resp, err := ts.c.GetSchema(context.Background())
	if err != nil {
		ts.t.Fatal(err)
	}
	md, err := testschema.Descriptor(resp.Descriptors, typeName)
	if err != nil {
		ts.t.Fatal(err)
	}
	return md
}

// write sends batches on one client stream of the given operation and
// returns the response or the error.
func (ts *testServer) write(op pb.WriteOp, batches ...[]*anypb.Any) (*pb.WriteResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := ts.c.API()
	var st interface {
		Send(*pb.WriteRequest) error
		CloseAndRecv() (*pb.WriteResponse, error)
	}
	var err error
	switch op {
	case pb.WriteOp_WRITE_OP_INSERT:
		st, err = api.Insert(ctx)
	case pb.WriteOp_WRITE_OP_UPDATE:
		st, err = api.Update(ctx)
	case pb.WriteOp_WRITE_OP_UPSERT:
		st, err = api.Upsert(ctx)
	case pb.WriteOp_WRITE_OP_REMOVE:
		st, err = api.Remove(ctx)
	}
	if err != nil {
		return nil, err
	}
	for _, b := range batches {
		if err := st.Send(&pb.WriteRequest{Records: b}); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server ended the stream; CloseAndRecv has its status
			}
			return nil, err
		}
	}
	return st.CloseAndRecv()
}

func (ts *testServer) mustWrite(op pb.WriteOp, batches ...[]*anypb.Any) *pb.WriteResponse {
	ts.t.Helper()
	resp, err := ts.write(op, batches...)
	if err != nil {
		ts.t.Fatalf("%v: %v", op, err)
	}
	return resp
}

// records returns the stored records of a type as JSON-able messages, in
// primary-key order, read by one sequential Scan (one snapshot). One record
// a message: any stored record fits in a message (it arrived in one), a
// batch of them may not under a small Config.MaxMessageBytes.
func (ts *testServer) records(typeName string) []*dynamicpb.Message {
	ts.t.Helper()
	md := ts.desc(typeName)
	st, err := ts.c.API().Scan(context.Background(), &pb.ScanRequest{
		Query: &pb.Query{Type: typeName, Order: &pb.Order{}}, Parallelism: 1, BatchSize: 1})
	if err != nil {
		ts.t.Fatal(err)
	}
	var out []*dynamicpb.Message
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			ts.t.Fatal(err)
		}
		for _, a := range resp.Records {
			m := dynamicpb.NewMessage(md)
			if err := proto.Unmarshal(a.GetValue(), m); err != nil {
				ts.t.Errorf("stored record does not decode: %v", err)
			}
			out = append(out, m)
		}
	}
}

// stats returns the engine's counters through the lab service, which the
// server registers only with Config.Lab.
func (ts *testServer) stats() *labv1.StatsResponse {
	ts.t.Helper()
	st, err := labv1.NewLabClient(ts.c.Conn()).Stats(context.Background(), &labv1.StatsRequest{})
	if err != nil {
		ts.t.Fatalf("lab stats (is Config.Lab set?): %v", err)
	}
	return st
}

func (ts *testServer) count(typeName string) int { return len(ts.records(typeName)) }

// writeErr checks err is a status with code and a WriteError detail, and
// returns the detail.
func writeErr(t *testing.T, err error, code codes.Code) *pb.WriteError {
	t.Helper()
	if err == nil {
		t.Fatalf("want %v, got OK", code)
	}
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("want code %v, got %v: %v", code, st.Code(), st.Message())
	}
	for _, d := range st.Details() {
		if we, ok := d.(*pb.WriteError); ok {
			return we
		}
	}
	t.Fatalf("status %v has no WriteError detail", st)
	return nil
}

func fieldValue(m *dynamicpb.Message, name string) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}
