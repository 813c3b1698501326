package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/engine/enginetest"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/internal/testschema"
)

const shopProto = testschema.ShopMembers

// noNameIndex is shopProto without shop.User's index on name.
var noNameIndex = strings.Replace(shopProto, "    index: { fields: \"name\" }\n", "", 1)

// testEngine is an engine on a real Pebble store in a temporary directory.
type testEngine struct{ *enginetest.Engine }

func openEngine(t testing.TB, dir string, opts engine.Options) *testEngine {
	t.Helper()
	return &testEngine{enginetest.Open(t, dir, opts)}
}

// reopen closes the engine and store and opens them again on the same
// directory.
func (te *testEngine) reopen() *testEngine { return &testEngine{te.Reopen()} }

// skipLargeInRaceRun skips t in the race run (go test -race -short): t
// writes tens of thousands of records or more to test a bound, which the
// race detector slows several times over while its goroutines are those of
// smaller tests; the plain run tests it in full.
func skipLargeInRaceRun(t *testing.T) {
	t.Helper()
	if raceEnabled && testing.Short() {
		t.Skip("large data: left to the run without the race detector")
	}
}

// newEngine opens an engine on a fresh directory with shopProto applied.
func newEngine(t testing.TB) *testEngine {
	t.Helper()
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"shop.proto": shopProto})
	return te
}

// stored returns the stored bytes of every record of a type, in
// primary-key order, read by a Scan (which returns records as stored).
func (te *testEngine) stored(typeName string) [][]byte {
	te.T.Helper()
	var out [][]byte
	req := &pb.ScanRequest{Query: &pb.Query{Type: typeName, Order: &pb.Order{}}}
	err := te.E.Scan(te.T.Context(), req, func(resp *pb.ScanResponse) error {
		for _, a := range resp.Records {
			out = append(out, append([]byte(nil), a.Value...))
		}
		return nil
	})
	if err != nil {
		te.T.Fatal(err)
	}
	return out
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

// pebbleStore opens a Pebble store in a directory of the test's, closed
// when the test ends.
func pebbleStore(t testing.TB) *pebble.Store {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
