package engine_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

type handle struct {
	ID    int64    `json:"id,string"`
	Names []string `json:"names,omitempty"`
}

// wantRecordError checks that err is code with a WriteError naming field
// and a reason holding every one of parts.
func wantRecordError(t *testing.T, err error, code apierror.Code, field string, parts ...string) {
	t.Helper()
	var e *apierror.Error
	if !errors.As(err, &e) || e.Code != code || e.Write == nil {
		t.Fatalf("want %v with a WriteError, got %v", code, err)
	}
	if e.Write.Field != field {
		t.Fatalf("error names field %q, want %q: %v", e.Write.Field, field, e)
	}
	for _, p := range parts {
		if !strings.Contains(e.Write.Reason, p) {
			t.Fatalf("reason %q lacks %q", e.Write.Reason, p)
		}
	}
}

// TestRepeatedUniqueIndex: a unique index on a repeated field lets no two
// records share an element; a record may repeat its own. The error names
// the field and the element. An element freed by an update or a remove,
// earlier in the same batch or before, may be taken.
func TestRepeatedUniqueIndex(t *testing.T) {
	repeatedStores(t, func(t *testing.T, re *repeatedEngine) {
		h := func(id int64, names ...string) *anypb.Any { return re.rec("rp.Handle", handle{ID: id, Names: names}) }
		insert := func(recs ...*anypb.Any) error { return re.write(engine.Batch{Op: engine.OpInsert, Records: recs}) }
		if err := insert(h(1, "ann", "bob", "ann")); err != nil {
			t.Fatalf("a record repeating its own element: %v", err)
		}
		wantRecordError(t, insert(h(2, "cy", "bob")), apierror.AlreadyExists, "names",
			`unique index names already holds the element "bob" for another record`)
		wantRecordError(t, insert(h(2, "cy"), h(3, "dee", "cy")), apierror.AlreadyExists, "names", `"cy"`)
		// An update frees "bob": the next record of the batch takes it.
		re.mustWrite(engine.Batch{Op: engine.OpUpsert, Records: []*anypb.Any{h(1, "ann"), h(2, "bob", "cy")}})
		// A remove frees "ann" for an insert after it in the batch.
		re.mustWrite(engine.Batch{Ops: []pb.WriteOp{pb.WriteOp_WRITE_OP_REMOVE, pb.WriteOp_WRITE_OP_INSERT}, Records: []*anypb.Any{h(1), h(4, "ann")}})
		wantRecordError(t, re.write(engine.Batch{Op: engine.OpUpdate, Records: []*anypb.Any{h(4, "ann", "cy")}}),
			apierror.AlreadyExists, "names", `"cy"`)
		got, plan := re.ids(&pb.Query{Type: "rp.Handle", Filter: `names in ("ann", "bob", "cy", "zed")`, Explain: true}, 0)
		if plan.GetIndex() != "names" || len(got) != 2 || got[0] != 4 || got[1] != 2 {
			t.Fatalf("names in (ann, bob, cy, zed): %v by %s, want [4 2] by index names", got, plan.GetText())
		}
		if r, err := engine.Check(t.Context(), re.st); err != nil || !r.OK() {
			t.Fatalf("check: %v %v", err, r)
		}
	})
}

// TestRepeatedIndexHostile: a record with 100,000 elements is refused
// with INVALID_ARGUMENT naming the field and the limit of entries per
// record; 100,000 copies of one element are one entry; the limit itself
// fits. Nothing of a refused batch applies.
func TestRepeatedIndexHostile(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"rp.proto": repeatedProto})
	re := &repeatedEngine{t: t, e: te.E, st: te.St}
	many := func(n, distinct int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "t" + strconv.Itoa(i%distinct)
		}
		return out
	}
	err := re.write(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{
		re.rec("rp.Doc", doc{ID: 1, Tags: []string{"x"}}),
		re.rec("rp.Doc", doc{ID: 2, Tags: many(100_000, 100_000)}),
	}})
	wantRecordError(t, err, apierror.InvalidArgument, "tags", "100000 distinct elements",
		"more than the limit of "+strconv.Itoa(engine.MaxIndexEntriesPerRecord)+" entries per record in index tags")
	re.mustWrite(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{
		re.rec("rp.Doc", doc{ID: 3, Tags: many(100_000, 1)}),
		re.rec("rp.Doc", doc{ID: 4, Tags: many(engine.MaxIndexEntriesPerRecord, engine.MaxIndexEntriesPerRecord)}),
	}})
	// A patch may not grow a record past it either.
	err = re.write(engine.Batch{Op: engine.OpPatch, Fields: []string{"tags"}, Records: []*anypb.Any{
		re.rec("rp.Doc", doc{ID: 3, Tags: many(engine.MaxIndexEntriesPerRecord+1, engine.MaxIndexEntriesPerRecord+1)}),
	}})
	wantRecordError(t, err, apierror.InvalidArgument, "tags", "1001 distinct elements")
	if got, _ := re.ids(&pb.Query{Type: "rp.Doc", Filter: `tags in ("x", "t0", "t999")`}, 0); len(got) != 2 {
		t.Fatalf("tags in (x, t0, t999): %v, want records 3 and 4", got)
	}
	te.MustCheck()

	// An index added over such a record fails its build, naming it.
	te2 := openEngine(t, t.TempDir(), engine.Options{})
	te2.Apply(map[string]string{"rp.proto": repeatedNoIndexProto})
	re2 := &repeatedEngine{t: t, e: te2.E, st: te2.St}
	re2.mustWrite(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{re2.rec("rp.Doc", doc{ID: 7, Tags: many(100_000, 100_000)})}})
	te2.Apply(map[string]string{"rp.proto": repeatedProto})
	ix := waitIndexNamed(t, te2, "tags")
	if ix.State != pb.IndexState_INDEX_STATE_FAILED || !strings.Contains(ix.Error, "100000 distinct elements") {
		t.Fatalf("index tags over a record of 100,000 tags: %v %q, want FAILED naming the limit", ix.State, ix.Error)
	}
	waitIndexNamed(t, te2, "team_tags")
	te2.MustCheck()
}

// TestRepeatedIndexBatchBound: a batch whose records together have more
// than MaxIndexEntriesPerBatch entries in indexes on repeated fields is
// refused with RESOURCE_EXHAUSTED naming the record that passed it, and
// nothing of it applies; its records fit in smaller batches.
func TestRepeatedIndexBatchBound(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"rp.proto": repeatedProto})
	re := &repeatedEngine{t: t, e: te.E, st: te.St}
	per := engine.MaxIndexEntriesPerRecord / 2 // two indexes name tags: 1,000 entries a record
	n := engine.MaxIndexEntriesPerBatch/(2*per) + 1
	recs := make([]*anypb.Any, n)
	for i := range recs {
		// rp.Doc's wire form: id (1), then the tags (2).
		b := protowire.AppendTag(nil, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(i+1))
		for k := range per {
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendString(b, "t"+strconv.Itoa(k))
		}
		recs[i] = &anypb.Any{TypeUrl: "type.googleapis.com/rp.Doc", Value: b}
	}
	err := re.write(engine.Batch{Op: engine.OpInsert, Records: recs})
	wantRecordError(t, err, apierror.ResourceExhausted, "tags", "more than 1000000 entries", "send fewer records per batch")
	if e := new(apierror.Error); errors.As(err, &e) && e.Write.Record != uint64(n-1) {
		t.Fatalf("error names record %d, want %d", e.Write.Record, n-1)
	}
	if n := re.count(&pb.Query{Type: "rp.Doc"}); n != 0 {
		t.Fatalf("%d records after the refused batch", n)
	}
	re.mustWrite(engine.Batch{Op: engine.OpInsert, Records: recs[:2]}) // the same records, fewer per batch
}

// repeatedNoIndexProto is repeatedProto's Doc without its indexes.
const repeatedNoIndexProto = `syntax = "proto3";
package rp;
import "protobase/v1/options.proto";
message Doc {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  repeated string tags = 2;
  string team = 3;
  repeated int32 nums = 4;
  string note = 5;
}
`

// repeatedTagIndexProto is repeatedNoIndexProto with one index, on tags.
var repeatedTagIndexProto = strings.Replace(repeatedNoIndexProto, `primary_key: "id" }`, `primary_key: "id" index: { fields: "tags" } }`, 1)

// tagDoc is an rp.Doc of id with 10 tags drawn by rnd from "tag0" to
// "tag<values-1>".
func tagDoc(rnd *rand.Rand, id, values int) *anypb.Any {
	v := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(id)) //nolint:gosec // ids are not negative
	for range 10 {
		v = protowire.AppendString(protowire.AppendTag(v, 2, protowire.BytesType), "tag"+strconv.Itoa(rnd.IntN(values)))
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/rp.Doc", Value: v}
}

// TestRepeatedIndexBuild adds indexes on repeated fields to a type with
// records: the build writes every element's entry, queries then use the
// index, and the checker agrees. A unique one over records that share an
// element fails, naming the index.
func TestRepeatedIndexBuild(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"rp.proto": repeatedNoIndexProto})
	re := &repeatedEngine{t: t, e: te.E, st: te.St}
	var recs []*anypb.Any
	for i := range 3000 {
		recs = append(recs, re.rec("rp.Doc", doc{ID: int64(i + 1), Tags: []string{"all", "m" + strconv.Itoa(i%7), "all"}}))
	}
	re.mustWrite(engine.Batch{Op: engine.OpInsert, Records: recs})
	te.Apply(map[string]string{"rp.proto": repeatedProto})
	for _, name := range []string{"tags", "team_tags", "nums"} {
		if ix := waitIndexNamed(t, te, name); ix.State != pb.IndexState_INDEX_STATE_READY {
			t.Fatalf("index %s: %v %s", name, ix.State, ix.Error)
		}
	}
	got, plan := re.ids(&pb.Query{Type: "rp.Doc", Filter: `tags in ("all", "m3")`, Explain: true}, 0)
	if plan.GetIndex() != "tags" || len(got) != 3000 {
		t.Fatalf("tags in (all, m3): %d records by %s, want 3000 by index tags", len(got), plan.GetText())
	}
	if n := re.count(&pb.Query{Type: "rp.Doc", Filter: `tags = "m3"`}); n != 429 {
		t.Fatalf("count of tags = m3: %d, want 429", n)
	}
	te.MustCheck()

	shared := strings.Replace(repeatedProto, `index: { fields: "nums" }`, `index: { fields: "nums" } index: { fields: "tags" unique: true name: "utags" }`, 1)
	te.Apply(map[string]string{"rp.proto": shared})
	ix := waitIndexNamed(t, te, "utags")
	if ix.State != pb.IndexState_INDEX_STATE_FAILED || !strings.Contains(ix.Error, "unique index utags: two records share one value") {
		t.Fatalf("unique index over shared elements: %v %q, want FAILED naming utags", ix.State, ix.Error)
	}
}

// TestRepeatedIndexSchema: an index names at most one repeated field, a
// repeated scalar; a primary key names none.
func TestRepeatedIndexSchema(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	for _, c := range []struct{ option, want string }{
		{`primary_key: "id" index: { fields: ["tags", "nums"] }`,
			`index "tags_nums": fields "tags", "nums" are all repeated; an index may name at most one repeated field`},
		{`primary_key: "id" index: { fields: "subs" }`, `field "subs" is a repeated message (rp.Sub)`},
		{`primary_key: "id" index: { fields: "subs.name" }`, `field "subs" is repeated; only the last field of an index path may be repeated`},
		{`primary_key: "tags"`, `field "tags" is repeated; a primary key names singular fields only`},
	} {
		src := `syntax = "proto3";
package rp;
import "protobase/v1/options.proto";
message Sub { string name = 1; }
message Doc {
  option (protobase.v1.record) = { ` + c.option + ` };
  int64 id = 1;
  repeated string tags = 2;
  repeated int32 nums = 3;
  repeated Sub subs = 4;
}
`
		_, err := te.E.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"rp.proto": src}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: got %v, want an error with %q", c.option, err, c.want)
		}
	}
}

// TestRepeatedIndexOrder: ordering by an index on a repeated field needs
// a condition on the field, which the error says; with one, the records
// come in element order, each once.
func TestRepeatedIndexOrder(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"rp.proto": repeatedProto})
	re := &repeatedEngine{t: t, e: te.E, st: te.St}
	re.mustWrite(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{
		re.rec("rp.Doc", doc{ID: 1, Tags: []string{"c", "a"}}),
		re.rec("rp.Doc", doc{ID: 2, Tags: []string{"b"}}),
		re.rec("rp.Doc", doc{ID: 3}),
	}})
	_, err := query(te.E, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "rp.Doc", Order: &pb.Order{Index: "tags"}}})
	if err == nil || !strings.Contains(err.Error(), "leaves out records without one") {
		t.Fatalf("order by tags without a condition: %v", err)
	}
	// A query that does not require an element never reads the index.
	for _, f := range []string{`tags != "a"`, `tags > "a"`, `team = "x" or tags = "a"`, `not (tags = "a")`} {
		if _, plan := re.ids(&pb.Query{Type: "rp.Doc", Filter: f, Explain: true}, 0); plan.GetAccess() != "full_scan" {
			t.Fatalf("%s: plan %s, want a full scan", f, plan.GetText())
		}
	}
	got, _ := re.ids(&pb.Query{Type: "rp.Doc", Filter: `tags in ("a", "b", "c")`, Order: &pb.Order{Index: "tags"}}, 1)
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("ordered by tags: %v, want [1 2]", got)
	}
	got, _ = re.ids(&pb.Query{Type: "rp.Doc", Filter: `tags in ("a", "b", "c")`, Order: &pb.Order{Index: "tags", Descending: true}}, 1)
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("ordered by tags, descending: %v, want [1 2] (c, then b)", got)
	}
}

// TestRepeatedIndexCheck: the checker reads the entries of an index on a
// repeated field from the records: an element's entry lost, or one left
// behind for an element the record no longer has, is reported.
func TestRepeatedIndexCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		want engine.ProblemKind
	}{{"entry lost", engine.ProblemMissingEntry}, {"stale entry", engine.ProblemStaleEntry}} {
		t.Run(c.name, func(t *testing.T) {
			te := openEngine(t, t.TempDir(), engine.Options{})
			te.Apply(map[string]string{"rp.proto": repeatedProto})
			re := &repeatedEngine{t: t, e: te.E, st: te.St}
			// Three records share "beta": the checker seeks the first's
			// entry, and reads the entries of the value at once for the
			// next (checkgroups.go), which must miss the third's.
			re.mustWrite(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{
				re.rec("rp.Doc", doc{ID: 1, Tags: []string{"alpha", "beta"}, Team: "red"}),
				re.rec("rp.Doc", doc{ID: 2, Tags: []string{"beta"}}),
				re.rec("rp.Doc", doc{ID: 3, Tags: []string{"beta"}}),
			}})
			te.MustCheck()
			tags, _ := te.E.Schema().Types["rp.Doc"].Index("tags")
			prefix := keyspace.IndexPrefix(tags.ID)
			k, _ := te.firstKey(prefix, "beta")
			if c.want == engine.ProblemMissingEntry {
				te.loseEntry(orderedcode.AppendInt(bytes.Clone(k[:len(k)-8]), 3))
			} else {
				stale := bytes.Replace(k, []byte("beta"), []byte("gamma"), 1)
				te.raw(map[string][]byte{string(stale): nil})
			}
			r, err := engine.Check(t.Context(), te.St)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Problems) != 1 || r.Problems[0].Kind != c.want || r.Problems[0].Index != "tags" {
				t.Fatalf("problems %v, want one %v in index tags", r.Problems, c.want)
			}
		})
	}
}

// TestRepeatedIndexBuildEtcd builds an index on tags over records of ten
// tags on an etcd member with its default 128 operations per
// transaction: a build step counts each record's entries against them, so
// the build fits its steps to the limit and ends READY.
func TestRepeatedIndexBuildEtcd(t *testing.T) {
	st, err := etcd.Open(etcd.Options{Endpoints: []string{etcdtest.Start(t, etcdtest.Limits{})}, Prefix: "/rpb/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, err := engine.Open(t.Context(), st, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	apply := func(src string) {
		if _, err := e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"rp.proto": src}}); err != nil {
			t.Fatal(err)
		}
	}
	apply(repeatedNoIndexProto)
	re := &repeatedEngine{t: t, e: e, st: st}
	want := uint64(0)
	for b := range 4 {
		var recs []*anypb.Any
		for i := range 25 {
			var tags []string
			for k := range 10 {
				tags = append(tags, "t"+strconv.Itoa((i+k)%13))
			}
			if slices.Contains(tags, "t0") {
				want++
			}
			recs = append(recs, re.rec("rp.Doc", doc{ID: int64(b*25 + i + 1), Tags: tags}))
		}
		re.mustWrite(engine.Batch{Op: engine.OpInsert, Records: recs})
	}
	apply(repeatedTagIndexProto)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ix, _ := e.Schema().Types["rp.Doc"].Index("tags")
		if ix.State == pb.IndexState_INDEX_STATE_READY {
			break
		}
		if ix.State == pb.IndexState_INDEX_STATE_FAILED || time.Now().After(deadline) {
			t.Fatalf("index tags: %v %s", ix.State, ix.Error)
		}
		time.Sleep(10 * time.Millisecond) // polling a state, not waiting out a race
	}
	if n := re.count(&pb.Query{Type: "rp.Doc", Filter: `tags = "t0"`}); n != want {
		t.Fatalf("count of tags = t0: %d, want %d", n, want)
	}
	if r, err := engine.Check(t.Context(), st); err != nil || !r.OK() {
		t.Fatalf("check: %v %v", err, r)
	}
}

// TestRepeatedIndexBuildOverLimit: a record stored with more elements
// than an index on them allows, before the index, is one an index build
// cannot write; updating it while the build runs succeeds (it has no
// entries to retract), and the build, reaching its new version, ends
// READY.
func TestRepeatedIndexBuildOverLimit(t *testing.T) {
	skipLargeInRaceRun(t)
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"rp.proto": repeatedNoIndexProto})
	re := &repeatedEngine{t: t, e: te.E, st: te.St}
	// Enough records before it that the builder takes many steps to
	// reach the last one.
	for from := 0; from < 50_000; from += 5000 {
		recs := make([]*anypb.Any, 0, 5000)
		for i := from; i < from+5000; i++ {
			recs = append(recs, re.rec("rp.Doc", doc{ID: int64(i + 1), Tags: []string{"t" + strconv.Itoa(i%5)}}))
		}
		re.mustWrite(engine.Batch{Op: engine.OpInsert, Records: recs})
	}
	many := make([]string, engine.MaxIndexEntriesPerRecord+500)
	for i := range many {
		many[i] = "e" + strconv.Itoa(i)
	}
	big := int64(1_000_000)
	re.mustWrite(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{re.rec("rp.Doc", doc{ID: big, Tags: many})}})

	te.Apply(map[string]string{"rp.proto": repeatedProto})
	gs, err := te.E.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, ix := range gs.Types[0].Indexes {
		if ix.Name == "tags" && ix.State != pb.IndexState_INDEX_STATE_BUILDING {
			t.Fatalf("index tags %v right after the schema change, want BUILDING", ix.State)
		}
	}
	re.mustWrite(engine.Batch{Op: engine.OpUpdate, Records: []*anypb.Any{re.rec("rp.Doc", doc{ID: big, Tags: []string{"z1", "z2"}})}})
	if ix := waitIndexNamed(t, te, "tags"); ix.State != pb.IndexState_INDEX_STATE_READY {
		t.Fatalf("index tags: %v %s, want READY once the record over the limit was updated", ix.State, ix.Error)
	}
	if got, _ := re.ids(&pb.Query{Type: "rp.Doc", Filter: `tags = "z2"`}, 0); len(got) != 1 || got[0] != big {
		t.Fatalf("tags = z2: %v, want [%d]", got, big)
	}
	te.MustCheck()
}
