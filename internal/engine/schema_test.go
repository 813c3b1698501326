package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
)

const itemProto = `syntax = "proto3";
package inv;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  string name = 2;
}
`

func openEngine(t *testing.T) *Engine {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(context.Background(), st, Options{})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	return e
}

// insertItem writes and syncs one inv.Item.
func insertItem(e *Engine, id int64) error {
	md, err := e.Schema().Compiled.Registry.FindDescriptorByName("inv.Item")
	if err != nil {
		return err
	}
	m := dynamicpb.NewMessage(md.(protoreflect.MessageDescriptor))
	m.Set(m.Descriptor().Fields().ByName("id"), protoreflect.ValueOfInt64(id))
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	w := e.NewWriter()
	if err := w.Apply(context.Background(), Batch{Op: OpInsert, Records: []*anypb.Any{{TypeUrl: "type.googleapis.com/inv.Item", Value: b}}}); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func apply(e *Engine, src string) (*pb.ApplySchemaResponse, error) {
	return e.ApplySchema(context.Background(), &pb.ApplySchemaRequest{Files: map[string]string{"inv.proto": src}})
}

// TestApplySchemaWritesGoOnWhilePlanning holds ApplySchema after it has
// compiled and planned, and writes meanwhile: the write is acknowledged
// (it does not wait for the schema change), and the change, planned when
// the type was empty, is planned again and builds its new index over the
// record written.
func TestApplySchemaWritesGoOnWhilePlanning(t *testing.T) {
	e := openEngine(t)
	if _, err := apply(e, itemProto); err != nil {
		t.Fatal(err)
	}
	planned, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	SetPlannedHook(t, func() {
		once.Do(func() {
			close(planned)
			<-release
		})
	})
	withIndex := strings.Replace(itemProto, `primary_key: "id"`, `primary_key: "id" index: { fields: "name" }`, 1)
	type result struct {
		resp *pb.ApplySchemaResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := apply(e, withIndex)
		done <- result{resp, err}
	}()
	<-planned
	wrote := make(chan error, 1)
	go func() { wrote <- insertItem(e, 1) }()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("write during ApplySchema: %v", err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the write waited for ApplySchema: it holds the write lock while it plans")
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatalf("ApplySchema: %v", r.err)
	}
	if !r.resp.Applied || len(r.resp.Plan.IndexesAdded) != 1 || !r.resp.Plan.IndexesAdded[0].BuildRequired {
		t.Fatalf("plan %v: want the index built over the record written while planning", r.resp.Plan)
	}
}

// TestApplySchemaReplansWhenEmptyTypeGainsRecords writes, while ApplySchema
// holds a change allowed only on an empty type (a field's type), a record of
// that type: the change is then refused, not applied over the record.
func TestApplySchemaReplansWhenEmptyTypeGainsRecords(t *testing.T) {
	e := openEngine(t)
	if _, err := apply(e, itemProto); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	SetPlannedHook(t, func() {
		once.Do(func() {
			// On ApplySchema's own goroutine: this would deadlock if it
			// held the write lock.
			if err := insertItem(e, 1); err != nil {
				t.Errorf("write during ApplySchema: %v", err)
			}
		})
	})
	_, err := apply(e, strings.Replace(itemProto, "string name = 2;", "bytes name = 2;", 1))
	var ee *apierror.Error
	if !errors.As(err, &ee) || ee.Code != apierror.FailedPrecondition || !strings.Contains(ee.Msg, "field name (2) changed from string to bytes") {
		t.Fatalf("ApplySchema = %v, want FAILED_PRECONDITION for the field type change", err)
	}
	if v := e.Schema().Version; v != 1 {
		t.Fatalf("schema version %d, want 1", v)
	}
}

// TestOpenLoadsCompiledSchema restarts an engine on its store: the stored
// schema is loaded from its compiled descriptors, not compiled again, and
// serves writes as before.
func TestOpenLoadsCompiledSchema(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Engine, *pebble.Store) {
		st, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, Sync: true})
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(context.Background(), st, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return e, st
	}
	e, st := open()
	if _, err := apply(e, itemProto); err != nil {
		t.Fatal(err)
	}
	if _, compiled := e.Schema().Compiled.UserFiles[0].(linker.File); !compiled {
		t.Fatal("a schema just applied should be the compiler's own")
	}
	e.Close()
	st.Close()

	e, st = open()
	defer st.Close()
	defer e.Close()
	if _, compiled := e.Schema().Compiled.UserFiles[0].(linker.File); compiled {
		t.Fatal("the stored schema was compiled again at start")
	}
	if err := insertItem(e, 7); err != nil {
		t.Fatalf("write after restart: %v", err)
	}
}
