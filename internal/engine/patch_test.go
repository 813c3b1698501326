package engine_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
)

// user is the model's shop.User: a unique email, an indexed name.
type user struct{ name, email string }

// modelWrite is one record of a batch: its operation and the user it
// carries (for a patch, has says which of its fields the record holds).
type modelWrite struct {
	op       pb.WriteOp
	id       int
	u        user
	hasName  bool
	hasEmail bool
}

// modelApply applies a batch to the model as the engine must: in order,
// all or nothing, existence before uniqueness. It returns the code and
// record of the first failure.
func modelApply(m map[int]user, ws []modelWrite, fields []string) (apierror.Code, int) {
	next := maps.Clone(m)
	taken := func(email string, id int) bool {
		for k, u := range next {
			if k != id && u.email == email {
				return true
			}
		}
		return false
	}
	for i, w := range ws {
		old, exists := next[w.id]
		u := w.u
		switch w.op {
		case pb.WriteOp_WRITE_OP_INSERT:
			if exists {
				return apierror.AlreadyExists, i
			}
		case pb.WriteOp_WRITE_OP_REMOVE:
			if !exists {
				return apierror.NotFound, i
			}
			delete(next, w.id)
			continue
		case pb.WriteOp_WRITE_OP_UPDATE:
			if !exists {
				return apierror.NotFound, i
			}
		case pb.WriteOp_WRITE_OP_PATCH:
			if !exists {
				return apierror.NotFound, i
			}
			u = old
			for _, f := range fields {
				if f == "name" {
					u.name = w.u.name // "" when the record lacks it: cleared
				} else {
					u.email = w.u.email
				}
			}
		}
		if taken(u.email, w.id) {
			return apierror.AlreadyExists, i
		}
		next[w.id] = u
	}
	clear(m)
	maps.Copy(m, next)
	return apierror.OK, -1
}

// TestPatchModel sends random batches of inserts, updates, removes and
// patches of shop.User (the patches setting name, email or both) and holds
// each outcome and the stored users to a model; the store's indexes are
// checked against its records as it goes.
func TestPatchModel(t *testing.T) {
	te := newEngine(t)
	rng := rand.New(rand.NewPCG(7, 8))
	names := []string{"ann", "bob", "cy"}
	emails := []string{"a@x", "b@x", "c@x", "d@x", "e@x", "f@x", "g@x", "h@x", "i@x", "j@x"}
	ops := []pb.WriteOp{pb.WriteOp_WRITE_OP_INSERT, pb.WriteOp_WRITE_OP_INSERT, pb.WriteOp_WRITE_OP_UPDATE, pb.WriteOp_WRITE_OP_REMOVE,
		pb.WriteOp_WRITE_OP_PATCH, pb.WriteOp_WRITE_OP_PATCH}
	model := map[int]user{}
	w := te.E.NewWriter()
	defer w.Close()
	applied := 0
	for round := range 2000 {
		fields := [][]string{{"name"}, {"email"}, {"name", "email"}}[rng.IntN(3)]
		ws := make([]modelWrite, 1+rng.IntN(3))
		b := engine.Batch{Fields: fields}
		for i := range ws {
			wr := modelWrite{op: ops[rng.IntN(len(ops))], id: 1 + rng.IntN(5),
				u: user{names[rng.IntN(len(names))], emails[rng.IntN(len(emails))]}, hasName: true, hasEmail: true}
			if wr.op == pb.WriteOp_WRITE_OP_PATCH {
				wr.hasName, wr.hasEmail = rng.IntN(4) != 0, rng.IntN(4) != 0
			}
			js := fmt.Sprintf(`{"id": %d`, wr.id)
			if wr.hasName {
				js += fmt.Sprintf(`, "name": %q`, wr.u.name)
			} else {
				wr.u.name = ""
			}
			if wr.hasEmail {
				js += fmt.Sprintf(`, "email": %q`, wr.u.email)
			} else {
				wr.u.email = ""
			}
			ws[i] = wr
			b.Ops = append(b.Ops, wr.op)
			b.Records = append(b.Records, te.Rec("shop.User", js+"}"))
		}
		if !slices.Contains(b.Ops, pb.WriteOp_WRITE_OP_PATCH) {
			b.Fields = nil
		}
		code, rec := modelApply(model, ws, b.Fields)
		err := w.Apply(t.Context(), b)
		if got := apierror.CodeOf(err); got != code {
			t.Fatalf("round %d: %v; model says %v at record %d (%+v, fields %q)", round, err, code, rec, ws, b.Fields)
		}
		if err != nil {
			var e *apierror.Error
			if !errors.As(err, &e) || e.Write == nil || e.Write.Record != uint64(rec) {
				t.Fatalf("round %d: %v, want record %d named", round, err, rec)
			}
			w = te.E.NewWriter() // a failed batch ends its stream
			continue
		}
		applied++
		if round%100 == 0 {
			if _, err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			checkModel(t, te, model)
		}
	}
	if _, err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	checkModel(t, te, model)
	if applied < 400 {
		t.Fatalf("only %d of 2000 batches applied: the test exercises too little", applied)
	}
}

// checkModel compares the stored users with the model and checks the
// store's consistency.
func checkModel(t *testing.T, te *testEngine, model map[int]user) {
	t.Helper()
	md := te.E.Schema().Types["shop.User"].Desc
	got := map[int]user{}
	for _, b := range te.stored("shop.User") {
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		get := func(name string) protoreflect.Value { return m.Get(md.Fields().ByName(protoreflect.Name(name))) }
		got[int(get("id").Int())] = user{get("name").String(), get("email").String()}
	}
	if !maps.Equal(got, model) {
		t.Fatalf("stored users %v, model %v", got, model)
	}
	te.MustCheck()
}

// BenchmarkPatch patches batches of 100 of 10,000 stored records, beside
// an update of the same records whole: one indexed field set, and one
// number added.
func BenchmarkPatch(b *testing.B) {
	const itemProto = `syntax = "proto3";
package bench;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "name" } };
  int64 id = 1;
  string name = 2;
  string email = 3;
  int64 created = 4;
  string note = 5;
  int64 views = 6;
}
`
	for _, c := range []struct {
		name        string
		op          engine.Op
		rec         string
		fields, add []string
	}{
		{"update", engine.OpUpdate, `{"id": ID, "name": "nID", "email": "user@example.com", "created": 1700000000000, "note": "lorem ipsum dolor sit amet", "views": 1}`, nil, nil},
		{"patch-set", engine.OpPatch, `{"id": ID, "name": "nID"}`, []string{"name"}, nil},
		{"patch-add", engine.OpPatch, `{"id": ID, "views": 1}`, nil, []string{"views"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			te := newEngine(b)
			te.Apply(map[string]string{"shop.proto": shopProto, "bench.proto": itemProto})
			const n = 10000
			all := make([]*anypb.Any, n)
			for i := range all {
				all[i] = te.Rec("bench.Item", replaceID(`{"id": ID, "name": "nID", "email": "user@example.com", "created": 1700000000000, "note": "lorem ipsum dolor sit amet"}`, i))
			}
			te.MustWrite(engine.OpInsert, all)
			recs := make([]*anypb.Any, n)
			for i := range recs {
				recs[i] = te.Rec("bench.Item", replaceID(c.rec, i))
			}
			w := te.E.NewWriter()
			defer w.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				at := i % (n / 100) * 100
				if err := w.Apply(b.Context(), engine.Batch{Op: c.op, Records: recs[at : at+100], Fields: c.fields, Add: c.add}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
