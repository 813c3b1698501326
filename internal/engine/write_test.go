package engine_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/apistatus"
	"github.com/protobase/protobase/internal/engine"
)

func TestWriteOperations(t *testing.T) {
	te := newEngine(t)
	ann := te.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "ann@x"}`)
	bob := te.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "bob@x"}`)
	te.MustWrite(engine.OpInsert, []*anypb.Any{ann, bob})
	wantStored(t, te, "shop.User", ann, bob)

	// Update replaces the bytes whole, index entries follow.
	ann2 := te.Rec("shop.User", `{"id": 1, "name": "Anna", "email": "anna@x"}`)
	te.MustWrite(engine.OpUpdate, []*anypb.Any{ann2})
	wantStored(t, te, "shop.User", ann2, bob)

	// Upsert inserts a missing record and replaces an existing one.
	cy := te.Rec("shop.User", `{"id": 3, "name": "Cy", "email": "cy@x"}`)
	bob2 := te.Rec("shop.User", `{"id": 2, "email": "bob@y"}`)
	te.MustWrite(engine.OpUpsert, []*anypb.Any{cy, bob2})
	wantStored(t, te, "shop.User", ann2, bob2, cy)

	// Remove reads only the primary key of the record it is given.
	te.MustWrite(engine.OpRemove, []*anypb.Any{te.Rec("shop.User", `{"id": 1, "name": "ignored"}`)})
	wantStored(t, te, "shop.User", bob2, cy)

	// The freed unique value is free again; the old one of bob is too.
	te.MustWrite(engine.OpInsert, []*anypb.Any{te.Rec("shop.User", `{"id": 4, "email": "anna@x"}`),
		te.Rec("shop.User", `{"id": 5, "email": "bob@x"}`)})
	te.MustCheck()

	// Get returns the stored bytes under the canonical URL.
	got, err := te.E.Get(t.Context(), te.Rec("shop.User", `{"id": 3}`))
	if err != nil || got == nil || !bytes.Equal(got.Value, cy.Value) {
		t.Fatalf("Get id 3 = %v, %v; want cy", got, err)
	}
	if got, err := te.E.Get(t.Context(), te.Rec("shop.User", `{"id": 1}`)); err != nil || got != nil {
		t.Fatalf("Get removed id 1 = %v, %v; want nil", got, err)
	}
}

// Records of one batch see each other in order: a key may be written,
// replaced and removed within a batch, and a unique value freed by one
// record may be taken by a later one.
func TestWriteInBatchOrder(t *testing.T) {
	te := newEngine(t)
	te.MustWrite(engine.OpInsert, []*anypb.Any{
		te.Rec("shop.User", `{"id": 1, "email": "a"}`),
		te.Rec("shop.User", `{"id": 2, "email": "b"}`),
	})
	// Swap the unique values through a third one, in one batch.
	te.MustWrite(engine.OpUpdate, []*anypb.Any{
		te.Rec("shop.User", `{"id": 1, "email": "tmp"}`),
		te.Rec("shop.User", `{"id": 2, "email": "a"}`),
		te.Rec("shop.User", `{"id": 1, "email": "b"}`),
	})
	wantStored(t, te, "shop.User",
		te.Rec("shop.User", `{"id": 1, "email": "b"}`),
		te.Rec("shop.User", `{"id": 2, "email": "a"}`))
	// Upsert twice, then remove, within one stream's batches.
	last := te.Rec("shop.User", `{"id": 3, "email": "c2"}`)
	te.MustWrite(engine.OpUpsert, []*anypb.Any{te.Rec("shop.User", `{"id": 3, "email": "c"}`), last})
	te.MustWrite(engine.OpRemove, []*anypb.Any{te.Rec("shop.User", `{"id": 3}`)})
	te.MustWrite(engine.OpUpsert, []*anypb.Any{te.Rec("shop.User", `{"id": 4, "email": "c"}`)})
	te.MustCheck()
	if n := len(te.stored("shop.User")); n != 3 {
		t.Fatalf("%d users, want 3", n)
	}
}

func TestWriteErrors(t *testing.T) {
	te := newEngine(t)
	ann := te.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "ann@x"}`)
	te.MustWrite(engine.OpInsert, []*anypb.Any{ann})
	before := te.stored("shop.User")

	cases := []struct {
		name    string
		op      engine.Op
		batches [][]*anypb.Any
		code    apierror.Code
		batch   uint64
		record  uint64
		field   string
		applied uint64 // records applied before the failing batch
	}{
		{"insert existing", engine.OpInsert, [][]*anypb.Any{{te.Rec("shop.User", `{"id": 7, "email": "n@x"}`)}, {te.Rec("shop.User", `{"id": 8, "email": "m@x"}`), ann}},
			apierror.AlreadyExists, 1, 1, "id", 1},
		{"insert twice in a batch", engine.OpInsert, [][]*anypb.Any{{te.Rec("shop.User", `{"id": 9, "email": "p@x"}`), te.Rec("shop.User", `{"id": 9, "email": "q@x"}`)}},
			apierror.AlreadyExists, 0, 1, "id", 0},
		{"unique value taken", engine.OpInsert, [][]*anypb.Any{{te.Rec("shop.User", `{"id": 2, "email": "ann@x"}`)}},
			apierror.AlreadyExists, 0, 0, "email", 0},
		{"unique value taken in the batch", engine.OpUpsert, [][]*anypb.Any{{te.Rec("shop.User", `{"id": 2, "email": "z@x"}`), te.Rec("shop.User", `{"id": 3, "email": "z@x"}`)}},
			apierror.AlreadyExists, 0, 1, "email", 0},
		{"update missing", engine.OpUpdate, [][]*anypb.Any{{ann, te.Rec("shop.User", `{"id": 5}`)}},
			apierror.NotFound, 0, 1, "id", 0},
		{"remove missing", engine.OpRemove, [][]*anypb.Any{{te.Rec("shop.User", `{"id": 5}`)}},
			apierror.NotFound, 0, 0, "id", 0},
		{"remove twice in a batch", engine.OpRemove, [][]*anypb.Any{{te.Rec("shop.User", `{"id": 1}`), te.Rec("shop.User", `{"id": 1}`)}},
			apierror.NotFound, 0, 1, "id", 0},
		{"composite unique", engine.OpInsert, [][]*anypb.Any{{te.Rec("shop.Member", `{"org": "o", "id": 1, "handle": "h"}`), te.Rec("shop.Member", `{"org": "o", "id": 2, "handle": "h"}`)}},
			apierror.AlreadyExists, 0, 1, "org,handle", 0},
		{"unknown type", engine.OpUpsert, [][]*anypb.Any{{ann, {TypeUrl: "type.googleapis.com/shop.Nope"}}},
			apierror.InvalidArgument, 0, 1, "", 0},
		{"undecodable record", engine.OpUpsert, [][]*anypb.Any{{{TypeUrl: ann.TypeUrl, Value: []byte{0x0a}}}},
			apierror.InvalidArgument, 0, 0, "", 0},
		// A batch of records holding no bytes is refused, not taken for
		// an empty batch.
		{"lone empty record", engine.OpInsert, [][]*anypb.Any{{{}}},
			apierror.InvalidArgument, 0, 0, "", 0},
		{"lone null record", engine.OpUpsert, [][]*anypb.Any{{nil}},
			apierror.InvalidArgument, 0, 0, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := te.Write(c.op, c.batches...)
			we := wantWriteError(t, err, c.code, c.batch, c.record)
			if c.field != "" && we.Field != c.field {
				t.Errorf("field %q, want %q", we.Field, c.field)
			}
			if we.BatchesApplied != c.batch || we.RecordsApplied != c.applied {
				t.Errorf("applied %d batches %d records, want %d and %d", we.BatchesApplied, we.RecordsApplied, c.batch, c.applied)
			}
			if we.Reason == "" || we.TypeUrl == "" && c.code != apierror.InvalidArgument {
				t.Errorf("WriteError lacks reason or type: %v", we)
			}
			// The status carries the same WriteError as a detail.
			st := apistatus.Status(err)
			if apierror.Code(st.Code()) != c.code || len(st.Details()) == 0 {
				t.Fatalf("status %v lacks the WriteError detail", st)
			}
			if d, ok := st.Details()[0].(*pb.WriteError); !ok || d.Record != c.record || d.Batch != c.batch {
				t.Errorf("status detail %v, want batch %d record %d", st.Details()[0], c.batch, c.record)
			}
			// Undo what earlier batches of the case applied; the failed
			// batch applied nothing.
			te.MustCheck()
			for _, b := range c.batches[:c.batch] {
				te.MustWrite(engine.OpRemove, b)
			}
			wantStoredBytes(t, te, "shop.User", before)
			if n := len(te.stored("shop.Member")); n != 0 {
				t.Fatalf("%d members stored after a failed batch", n)
			}
		})
	}
}

func TestWriteBatchLimit(t *testing.T) {
	te2 := openEngine(t, t.TempDir(), engine.Options{MaxRecordsPerBatch: 2})
	te2.Apply(map[string]string{"shop.proto": shopProto})
	recs := []*anypb.Any{
		te2.Rec("shop.User", `{"id": 1, "email": "a"}`),
		te2.Rec("shop.User", `{"id": 2, "email": "b"}`),
		te2.Rec("shop.User", `{"id": 3, "email": "c"}`),
	}
	wantWriteError(t, te2.Write(engine.OpInsert, recs), apierror.ResourceExhausted, 0, 2)
	te2.MustWrite(engine.OpInsert, recs[:2])
}

func wantStored(t *testing.T, te *testEngine, typeName string, recs ...*anypb.Any) {
	t.Helper()
	want := make([][]byte, len(recs))
	for i, r := range recs {
		want[i] = r.Value
	}
	wantStoredBytes(t, te, typeName, want)
}

func wantStoredBytes(t *testing.T, te *testEngine, typeName string, want [][]byte) {
	t.Helper()
	got := te.stored(typeName)
	if len(got) != len(want) {
		t.Fatalf("%d %s records stored, want %d", len(got), typeName, len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s record %d: stored %x, want %x", typeName, i, got[i], want[i])
		}
	}
	te.MustCheck()
}
