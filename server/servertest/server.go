package servertest

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/protobase/protobase/internal/serverhook"
	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/server"
)

// Server is a real server in the test's process on a loopback port, with
// its data where Cfg says (a temporary directory unless a test chose),
// and a client connected to it: what the server's tests and the
// robustness tests (tests/robustness) start.
type Server struct {
	T   *testing.T
	Srv *server.Server
	Cfg server.Config
	C   *client.Client

	stopOnce sync.Once
	// descs caches the server's descriptors by type name; Apply clears
	// it. descMu guards it: tests build records from several goroutines.
	descMu sync.Mutex
	descs  map[string]protoreflect.MessageDescriptor
}

// New starts a server of cfg in the test's process on a free loopback
// port, with a client; the test's cleanup stops both.
func New(t *testing.T, cfg server.Config) *Server {
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
	return With(t, srv, cfg, c)
}

// With is the Server of srv, which the test started with cfg, and c, a
// client of it the test dialled itself (with an API key, over TLS); the
// test's cleanup stops both.
func With(t *testing.T, srv *server.Server, cfg server.Config, c *client.Client) *Server {
	s := &Server{T: t, Srv: srv, Cfg: cfg, C: c}
	t.Cleanup(s.Stop)
	return s
}

// ForgetDescriptors drops the descriptors Rec builds records with, for a
// schema another server changed: Rec asks this one again.
func (s *Server) ForgetDescriptors() {
	s.descMu.Lock()
	s.descs = nil
	s.descMu.Unlock()
}

// Stop closes the client and stops the server; calls after the first do
// nothing.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.C != nil {
			s.C.Close()
		}
		if err := s.Srv.Stop(); err != nil {
			s.T.Errorf("stop: %v", err)
		}
	})
}

// Restart stops the server and starts a new one of the same Config.
func (s *Server) Restart() *Server {
	s.T.Helper()
	s.Stop()
	return New(s.T, s.Cfg)
}

// Apply applies a schema.
func (s *Server) Apply(files map[string]string, opts client.SchemaOptions) (*pb.ApplySchemaResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.descMu.Lock()
	s.descs = nil
	s.descMu.Unlock()
	return s.C.ApplySchema(ctx, files, opts)
}

// MustApply applies a schema or fails the test.
func (s *Server) MustApply(files map[string]string) *pb.ApplySchemaResponse {
	s.T.Helper()
	resp, err := s.Apply(files, client.SchemaOptions{})
	if err != nil {
		s.T.Fatalf("apply schema: %v", err)
	}
	return resp
}

// Rec builds a record of typeName from JSON with the server's own
// descriptors, as a client of a runtime schema would.
func (s *Server) Rec(typeName, js string) *anypb.Any {
	s.T.Helper()
	s.descMu.Lock()
	md, ok := s.descs[typeName]
	s.descMu.Unlock()
	if !ok {
		md = s.Desc(typeName) // may fail the test: not under the lock
		s.descMu.Lock()
		if s.descs == nil {
			s.descs = map[string]protoreflect.MessageDescriptor{}
		}
		s.descs[typeName] = md
		s.descMu.Unlock()
	}
	a, err := testschema.Record(md, js)
	if err != nil {
		s.T.Fatal(err)
	}
	return a
}

// Desc returns the descriptor of typeName the server holds.
func (s *Server) Desc(typeName string) protoreflect.MessageDescriptor {
	s.T.Helper()
	resp, err := s.C.GetSchema(context.Background())
	if err != nil {
		s.T.Fatal(err)
	}
	md, err := testschema.Descriptor(resp.Descriptors, typeName)
	if err != nil {
		s.T.Fatal(err)
	}
	return md
}

// Write sends batches on one client stream of op and returns the
// response or the error.
func (s *Server) Write(op pb.WriteOp, batches ...[]*anypb.Any) (*pb.WriteResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := s.C.API()
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
	default:
		return nil, fmt.Errorf("write: operation %v", op)
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

// MustWrite is Write, failing the test on an error.
func (s *Server) MustWrite(op pb.WriteOp, batches ...[]*anypb.Any) *pb.WriteResponse {
	s.T.Helper()
	resp, err := s.Write(op, batches...)
	if err != nil {
		s.T.Fatalf("%v: %v", op, err)
	}
	return resp
}

// Records returns the stored records of a type, in primary-key order,
// read by one sequential Scan (one snapshot), one record a message.
func (s *Server) Records(typeName string) []*dynamicpb.Message {
	s.T.Helper()
	md := s.Desc(typeName)
	st, err := s.C.API().Scan(context.Background(), &pb.ScanRequest{
		Query: &pb.Query{Type: typeName, Order: &pb.Order{}}, Parallelism: 1, BatchSize: 1})
	if err != nil {
		s.T.Fatal(err)
	}
	var out []*dynamicpb.Message
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			s.T.Fatal(err)
		}
		for _, a := range resp.Records {
			m := dynamicpb.NewMessage(md)
			if err := proto.Unmarshal(a.GetValue(), m); err != nil {
				s.T.Errorf("stored record does not decode: %v", err)
			}
			out = append(out, m)
		}
	}
}

// WaitIndex polls the schema until index name of typ is in state want,
// for at most 30 s, and returns it.
func (s *Server) WaitIndex(typ, name string, want pb.IndexState) *pb.Index {
	s.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := s.C.GetSchema(s.T.Context())
		if err != nil {
			s.T.Fatal(err)
		}
		for _, rt := range resp.Types {
			if rt.Name != typ {
				continue
			}
			for _, ix := range rt.Indexes {
				if ix.Name == name && ix.State == want {
					return ix
				}
			}
		}
		if time.Now().After(deadline) {
			s.T.Fatalf("index %s.%s never reached %v: %v", typ, name, want, resp.Types)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Flush writes the server's memtables to storage files.
func (s *Server) Flush() error { return serverhook.Flush(s.Srv) }

// WriteErr checks err is a status with code and a WriteError detail, and
// returns the detail.
func WriteErr(t *testing.T, err error, code codes.Code) *pb.WriteError {
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

// FieldValue is the value of field name of m.
func FieldValue(m *dynamicpb.Message, name string) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

// Stats returns the engine's counters through the lab service, which the
// server registers only with Config.Lab.
func (s *Server) Stats() *labv1.StatsResponse {
	s.T.Helper()
	st, err := labv1.NewLabClient(s.C.Conn()).Stats(context.Background(), &labv1.StatsRequest{})
	if err != nil {
		s.T.Fatalf("lab stats (is Config.Lab set?): %v", err)
	}
	return st
}

// Count is the number of stored records of a type.
func (s *Server) Count(typeName string) int { return len(s.Records(typeName)) }
