package engine_test

import (
	"testing"

	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/internal/testschema"
)

// A version read of a record whose batch is applied but not yet durable
// waits until it is (the writer here never syncs: the read makes it
// durable itself): a power cut after the read keeps that batch, so the
// version is never given to another write, and a client's update
// conditioned on it fails once another client has written the record,
// instead of passing against that client's content (a lost update).
func TestVersionsReadAreDurable(t *testing.T) {
	for _, how := range []string{"get", "query"} {
		t.Run(how, func(t *testing.T) { versionsReadAreDurable(t, how) })
	}
}

func versionsReadAreDurable(t *testing.T, how string) {
	fs := pebble.NewMemFS()
	open := func(fs *pebble.MemFS) *engine.Engine {
		st, err := pebble.Open(pebble.Options{Dir: "/data", Layout: keyspace.Layout{}, Sync: true, FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.Open(t.Context(), st, engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(); st.Close() })
		return e
	}
	rec := func(e *engine.Engine, js string) *anypb.Any {
		a, err := testschema.Record(e.Schema().Types["shop.User"].Desc, js)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	read := func(e *engine.Engine) (string, uint64) {
		var recs []*anypb.Any
		var vers []uint64
		if how == "get" {
			resp, h, err := e.GetRecords(t.Context(), &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{structpb.NewNumberValue(1)}, Versions: true}, 0)
			if err != nil {
				t.Fatal(err)
			}
			h.Release()
			recs, vers = resp.Records, resp.Versions
		} else {
			resp, err := query(e, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "shop.User", Filter: "id == 1", Versions: true}})
			if err != nil {
				t.Fatal(err)
			}
			recs, vers = resp.Records, resp.Versions
		}
		if len(recs) != 1 || len(vers) != 1 {
			t.Fatalf("%s: %d records, %d versions", how, len(recs), len(vers))
		}
		m := dynamicpb.NewMessage(e.Schema().Types["shop.User"].Desc)
		if err := recs[0].UnmarshalTo(m); err != nil {
			t.Fatal(err)
		}
		return m.Get(m.Descriptor().Fields().ByName("name")).String(), vers[0]
	}
	e := open(fs)
	if _, err := e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": shopProto}}); err != nil {
		t.Fatal(err)
	}
	w := e.NewWriter()
	if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{rec(e, `{"id":1,"name":"a"}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpUpdate, Records: []*anypb.Any{rec(e, `{"id":1,"name":"b"}`)}}); err != nil {
		t.Fatal(err)
	}
	name, v := read(e) // the update is applied, its writer has not synced
	if name != "b" {
		t.Fatalf("read %q, want the update's b", name)
	}

	e2 := open(fs.PowerCut(nil, 0))
	if name2, v2 := read(e2); name2 != "b" || v2 != v {
		t.Fatalf("after a power cut: %q at version %d; the read before it returned b at version %d", name2, v2, v)
	}
	w2 := e2.NewWriter()
	defer w2.Close()
	if err := w2.Apply(t.Context(), engine.Batch{Op: engine.OpUpdate, Records: []*anypb.Any{rec(e2, `{"id":1,"name":"c"}`)}}); err != nil {
		t.Fatal(err)
	}
	err := w2.Apply(t.Context(), engine.Batch{Op: engine.OpUpdate, Records: []*anypb.Any{rec(e2, `{"id":1,"name":"b2"}`)},
		Conditions: []*pb.Condition{{Target: &pb.Condition_Record{Record: 0}, Version: &v}}})
	if code := apierror.CodeOf(err); code != apierror.Aborted {
		t.Fatalf("update conditioned on version %d, read before the power cut, after another update: %v, want ABORTED", v, err)
	}
}
