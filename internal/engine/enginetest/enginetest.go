// Package enginetest opens engines on real Pebble stores in temporary
// directories, for the tests of the engine and of the packages that read
// it (internal/watch): open, reopen on the same directory, apply a schema,
// build records from JSON, write batches and sync them.
package enginetest

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/internal/testschema"
)

// Engine is an engine on a real Pebble store in Dir; the test's cleanup
// closes both.
type Engine struct {
	T    testing.TB
	Dir  string
	Opts engine.Options
	St   *pebble.Store
	E    *engine.Engine
}

// Open opens an engine of opts on a Pebble store in dir, syncing writes.
func Open(t testing.TB, dir string, opts engine.Options) *Engine {
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
	te := &Engine{T: t, Dir: dir, Opts: opts, St: st, E: e}
	t.Cleanup(te.Close)
	return te
}

// Close closes the engine and its store; calls after the first do nothing.
func (te *Engine) Close() {
	if te.E == nil {
		return
	}
	if err := te.E.Close(); err != nil {
		te.T.Errorf("close engine: %v", err)
	}
	if err := te.St.Close(); err != nil {
		te.T.Errorf("close store: %v", err)
	}
	te.E = nil
}

// Reopen closes the engine and store and opens them again on the same
// directory.
func (te *Engine) Reopen() *Engine {
	te.Close()
	return Open(te.T, te.Dir, te.Opts)
}

// Apply applies a schema of files or fails the test.
func (te *Engine) Apply(files map[string]string) *pb.ApplySchemaResponse {
	te.T.Helper()
	return te.ApplyDropping(files)
}

// ApplyDropping is Apply with the types and indexes ("shop.User.email")
// it may drop.
func (te *Engine) ApplyDropping(files map[string]string, allowDrop ...string) *pb.ApplySchemaResponse {
	te.T.Helper()
	resp, err := te.E.ApplySchema(te.T.Context(), &pb.ApplySchemaRequest{Files: files, AllowDrop: allowDrop})
	if err != nil {
		te.T.Fatalf("apply schema: %v", err)
	}
	return resp
}

// Rec builds a record of a type of the engine's schema from JSON.
func (te *Engine) Rec(typeName, js string) *anypb.Any {
	te.T.Helper()
	rt, ok := te.E.Schema().Types[protoreflect.FullName(typeName)]
	if !ok {
		te.T.Fatalf("no type %s", typeName)
	}
	a, err := testschema.Record(rt.Desc, js)
	if err != nil {
		te.T.Fatal(err)
	}
	return a
}

// Write applies batches of op on one writer and syncs; it returns the
// first error.
func (te *Engine) Write(op engine.Op, batches ...[]*anypb.Any) error {
	w := te.E.NewWriter()
	defer w.Close()
	for _, b := range batches {
		if err := w.Apply(te.T.Context(), engine.Batch{Op: op, Records: b}); err != nil {
			return err
		}
	}
	_, err := w.Sync()
	return err
}

// MustWrite is Write, failing the test on an error.
func (te *Engine) MustWrite(op engine.Op, batches ...[]*anypb.Any) {
	te.T.Helper()
	if err := te.Write(op, batches...); err != nil {
		te.T.Fatalf("%v: %v", op, err)
	}
}

// MustCheck fails the test unless engine.Check finds the store consistent.
func (te *Engine) MustCheck() *engine.CheckReport {
	te.T.Helper()
	r, err := engine.Check(te.T.Context(), te.St)
	if err != nil {
		te.T.Fatal(err)
	}
	if !r.OK() {
		te.T.Fatalf("store inconsistent: %v", r.Problems)
	}
	return r
}
