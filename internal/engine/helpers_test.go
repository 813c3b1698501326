package engine_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/internal/testschema"
)

const shopProto = testschema.ShopMembers

// testEngine is an engine on a real Pebble store in a temporary directory.
type testEngine struct {
	t    testing.TB
	dir  string
	opts engine.Options
	st   *pebble.Store
	e    *engine.Engine
}

func openEngine(t testing.TB, dir string, opts engine.Options) *testEngine {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(t.Context(), st, opts)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	te := &testEngine{t: t, dir: dir, opts: opts, st: st, e: e}
	t.Cleanup(te.close)
	return te
}

// newEngine opens an engine on a fresh directory with shopProto applied.
func newEngine(t testing.TB) *testEngine {
	t.Helper()
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.apply(map[string]string{"shop.proto": shopProto})
	return te
}

func (te *testEngine) close() {
	if te.e == nil {
		return
	}
	if err := te.e.Close(); err != nil {
		te.t.Errorf("close engine: %v", err)
	}
	if err := te.st.Close(); err != nil {
		te.t.Errorf("close store: %v", err)
	}
	te.e = nil
}

// reopen closes the engine and store and opens them again on the same
// directory.
func (te *testEngine) reopen() *testEngine {
	te.close()
	return openEngine(te.t, te.dir, te.opts)
}

func (te *testEngine) apply(files map[string]string) *pb.ApplySchemaResponse {
	te.t.Helper()
	resp, err := te.e.ApplySchema(te.t.Context(), &pb.ApplySchemaRequest{Files: files})
	if err != nil {
		te.t.Fatalf("apply schema: %v", err)
	}
	return resp
}

// rec builds a record of a type of the engine's schema from JSON.
func (te *testEngine) rec(typeName, js string) *anypb.Any {
	te.t.Helper()
	rt, ok := te.e.Schema().Types[protoreflect.FullName(typeName)]
	if !ok {
		te.t.Fatalf("no type %s", typeName)
	}
	a, err := testschema.Record(rt.Desc, js)
	if err != nil {
		te.t.Fatal(err)
	}
	return a
}

// write applies batches of op on one writer and syncs; it returns the
// first error.
func (te *testEngine) write(op engine.Op, batches ...[]*anypb.Any) error {
	w := te.e.NewWriter()
	defer w.Close()
	for _, b := range batches {
		if err := w.Apply(te.t.Context(), op, b); err != nil {
			return err
		}
	}
	_, err := w.Sync()
	return err
}

func (te *testEngine) mustWrite(op engine.Op, batches ...[]*anypb.Any) {
	te.t.Helper()
	if err := te.write(op, batches...); err != nil {
		te.t.Fatalf("%v: %v", op, err)
	}
}

// stored returns the stored bytes of every record of a type, in
// primary-key order, read by a Scan (which returns records as stored).
func (te *testEngine) stored(typeName string) [][]byte {
	te.t.Helper()
	var out [][]byte
	req := &pb.ScanRequest{Query: &pb.Query{Type: typeName, Order: &pb.Order{}}}
	err := te.e.Scan(te.t.Context(), req, func(resp *pb.ScanResponse) error {
		for _, a := range resp.Records {
			out = append(out, append([]byte(nil), a.Value...))
		}
		return nil
	})
	if err != nil {
		te.t.Fatal(err)
	}
	return out
}

// mustCheck fails the test unless engine.Check finds the store consistent.
func (te *testEngine) mustCheck() *engine.CheckReport {
	te.t.Helper()
	r, err := engine.Check(context.Background(), te.st)
	if err != nil {
		te.t.Fatal(err)
	}
	if !r.OK() {
		te.t.Fatalf("store inconsistent: %v", r.Problems)
	}
	return r
}

// wantWriteError checks that err is an *apierror.Error with code and a
// WriteError naming batch and record, and returns the WriteError.
func wantWriteError(t *testing.T, err error, code apierror.Code, batch, record uint64) *pb.WriteError {
	t.Helper()
	var e *apierror.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *apierror.Error %v, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want code %v, got %v: %v", code, e.Code, e)
	}
	if e.Write == nil {
		t.Fatalf("error %v has no WriteError", e)
	}
	if e.Write.Batch != batch || e.Write.Record != record {
		t.Fatalf("WriteError names batch %d record %d, want batch %d record %d: %v",
			e.Write.Batch, e.Write.Record, batch, record, e)
	}
	return e.Write
}

// query is Engine.Query for a test that keeps nothing of the answer's
// bytes against the result budget: its hold is given back at once.
func query(e *engine.Engine, ctx context.Context, req *pb.QueryRequest) (*pb.QueryResponse, error) {
	resp, h, err := e.Query(ctx, req, 0)
	h.Release()
	return resp, err
}

// getRecords is Engine.GetRecords as query is Engine.Query.
func getRecords(e *engine.Engine, ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	resp, h, err := e.GetRecords(ctx, req, 0)
	h.Release()
	return resp, err
}

func codeOf(err error) apierror.Code { return apierror.CodeOf(err) }
