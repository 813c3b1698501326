package engine_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/internal/testschema"
)

var repeatedSeed = flag.Uint64("repeated.seed", 0, "seed of TestRepeatedIndexModel (0: from the clock)")

// repeatedProto has indexes on repeated fields: alone, in a compound
// index after a singular field, on integers, and unique.
const repeatedProto = `syntax = "proto3";
package rp;
import "protobase/v1/options.proto";
message Doc {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "tags" }
    index: { name: "team_tags" fields: ["team", "tags"] }
    index: { fields: "nums" }
  };
  int64 id = 1;
  repeated string tags = 2;
  string team = 3;
  repeated int32 nums = 4;
  string note = 5;
  int64 score = 6;
}
message Handle {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "names" unique: true } };
  int64 id = 1;
  repeated string names = 2;
}
`

// doc is the model of one rp.Doc.
type doc struct {
	ID    int64    `json:"id,string"`
	Tags  []string `json:"tags,omitempty"`
	Team  string   `json:"team,omitempty"`
	Nums  []int32  `json:"nums,omitempty"`
	Note  string   `json:"note,omitempty"`
	Score int64    `json:"score,omitempty,string"`
}

// repeatedEngine is an engine of repeatedProto on one store.
type repeatedEngine struct {
	t  *testing.T
	e  *engine.Engine
	st store.KV
}

func openRepeated(t *testing.T, st store.KV) *repeatedEngine {
	t.Helper()
	e, err := engine.Open(t.Context(), st, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"rp.proto": repeatedProto}}); err != nil {
		t.Fatal(err)
	}
	return &repeatedEngine{t: t, e: e, st: st}
}

// repeatedStores runs f on a Pebble store and on an etcd store.
func repeatedStores(t *testing.T, f func(t *testing.T, re *repeatedEngine)) {
	t.Run("pebble", func(t *testing.T) {
		st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}, Sync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, openRepeated(t, st))
	})
	t.Run("etcd", func(t *testing.T) {
		st, err := etcd.Open(etcd.Options{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/rp/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, openRepeated(t, st))
	})
}

func (re *repeatedEngine) rec(typeName string, v any) *anypb.Any {
	re.t.Helper()
	js, err := json.Marshal(v)
	if err != nil {
		re.t.Fatal(err)
	}
	rt := re.e.Schema().Types[protoreflect.FullName(typeName)]
	a, err := testschema.Record(rt.Desc, string(js))
	if err != nil {
		re.t.Fatal(err)
	}
	return a
}

func (re *repeatedEngine) write(b engine.Batch) error {
	w := re.e.NewWriter()
	defer w.Close()
	if err := w.Apply(re.t.Context(), b); err != nil {
		return err
	}
	_, err := w.Sync()
	return err
}

func (re *repeatedEngine) mustWrite(b engine.Batch) {
	re.t.Helper()
	if err := re.write(b); err != nil {
		re.t.Fatalf("%v: %v", b.Op, err)
	}
}

// ids runs q to its end, a page of pageSize at a time (0: one page), and
// returns the ids of its records in order and the plan of its first page.
func (re *repeatedEngine) ids(q *pb.Query, pageSize uint32) ([]int64, *pb.Plan) {
	re.t.Helper()
	var out []int64
	var plan *pb.Plan
	token := ""
	md := re.e.Schema().Types[protoreflect.FullName(q.Type)].Desc
	for {
		resp, err := query(re.e, re.t.Context(), &pb.QueryRequest{Query: q, PageSize: pageSize, PageToken: token})
		if err != nil {
			re.t.Fatalf("query %v: %v", q, err)
		}
		if plan == nil {
			plan = resp.Plan
		}
		for _, a := range resp.Records {
			m := dynamicpb.NewMessage(md)
			if err := a.UnmarshalTo(m); err != nil {
				re.t.Fatal(err)
			}
			out = append(out, m.Get(md.Fields().ByName("id")).Int())
		}
		if token = resp.NextPageToken; token == "" {
			return out, plan
		}
	}
}

func (re *repeatedEngine) count(q *pb.Query) uint64 {
	re.t.Helper()
	c := proto.CloneOf(q)
	c.Count = true
	resp, err := query(re.e, re.t.Context(), &pb.QueryRequest{Query: c})
	if err != nil {
		re.t.Fatalf("count %v: %v", q, err)
	}
	return resp.Count
}

// TestRepeatedIndexModel writes random records with random tags, updates,
// patches and removes them at random, and compares every `=` and `in`
// query that an index on a repeated field serves with a scan of the
// model: same records, each once, in the index's order, and the same
// counts; the checker finds every index entry in place. Run with
// -repeated.seed=N to replay a failure.
func TestRepeatedIndexModel(t *testing.T) {
	seed := *repeatedSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	repeatedStores(t, func(t *testing.T, re *repeatedEngine) {
		t.Logf("seed %d (replay with -repeated.seed=%d)", seed, seed)
		rnd := rand.New(rand.NewPCG(seed, 34))
		model := map[int64]doc{}
		next := int64(1)
		for round := range 12 {
			re.mutate(rnd, model, &next)
			for range 12 {
				re.compare(rnd, model, seed, round)
			}
		}
		r, err := engine.Check(t.Context(), re.st)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Fatalf("seed %d: store inconsistent: %v", seed, r.Problems)
		}
	})
}

var (
	modelTags  = []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	modelTeams = []string{"red", "blue", ""}
)

func randomDoc(rnd *rand.Rand, id int64) doc {
	d := doc{ID: id, Team: modelTeams[rnd.IntN(len(modelTeams))], Note: strconv.Itoa(rnd.IntN(100))}
	for range rnd.IntN(6) {
		d.Tags = append(d.Tags, modelTags[rnd.IntN(len(modelTags))]) // repeats included
	}
	for range rnd.IntN(4) {
		d.Nums = append(d.Nums, int32(rnd.IntN(7)-3))
	}
	return d
}

// spreadID maps the n-th id to one of runs of eight around multiples of
// 65,536, negative ones included, so that a tag's entries straddle the
// groups the Pebble store keeps entries in (store.EntryGroupSuffix).
func spreadID(n int64) int64 { return (n/8-2)<<16 + n%8 - 4 }

// mutate applies one random batch of each operation to the engine and the
// model.
func (re *repeatedEngine) mutate(rnd *rand.Rand, model map[int64]doc, next *int64) {
	var recs []*anypb.Any
	for range 5 + rnd.IntN(20) {
		d := randomDoc(rnd, spreadID(*next))
		*next++
		model[d.ID] = d
		recs = append(recs, re.rec("rp.Doc", d))
	}
	if rnd.IntN(2) == 0 { // a group's entries out of key order
		rnd.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	}
	re.mustWrite(engine.Batch{Op: engine.OpInsert, Records: recs})
	ids := slices.Sorted(func(yield func(int64) bool) {
		for id := range model {
			if !yield(id) {
				return
			}
		}
	})
	pick := func(n int) []int64 {
		rnd.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		out := slices.Clone(ids[:min(n, len(ids))])
		ids = ids[min(n, len(ids)):]
		return out
	}
	recs = nil
	for _, id := range pick(1 + rnd.IntN(6)) {
		d := randomDoc(rnd, id)
		if rnd.IntN(2) == 0 { // keep some elements, change others
			d.Tags = append(slices.Clone(model[id].Tags[:len(model[id].Tags)/2]), d.Tags...)
		}
		model[id] = d
		recs = append(recs, re.rec("rp.Doc", d))
	}
	re.mustWrite(engine.Batch{Op: engine.OpUpdate, Records: recs})
	// A patch of another field (set or added) keeps the entries; a patch
	// of the tags replaces them.
	recs = nil
	for _, id := range pick(1 + rnd.IntN(4)) {
		d := model[id]
		d.Note = "patched" + strconv.Itoa(rnd.IntN(9))
		model[id] = d
		recs = append(recs, re.rec("rp.Doc", doc{ID: id, Note: d.Note, Tags: []string{"ignored"}}))
	}
	re.mustWrite(engine.Batch{Op: engine.OpPatch, Records: recs, Fields: []string{"note"}})
	recs = nil
	for _, id := range pick(1 + rnd.IntN(4)) {
		d := model[id]
		d.Score += 3
		model[id] = d
		recs = append(recs, re.rec("rp.Doc", doc{ID: id, Score: 3, Tags: []string{"ignored"}}))
	}
	re.mustWrite(engine.Batch{Op: engine.OpPatch, Records: recs, Add: []string{"score"}})
	recs = nil
	for _, id := range pick(1 + rnd.IntN(4)) {
		d := model[id]
		d.Tags = randomDoc(rnd, id).Tags
		model[id] = d
		recs = append(recs, re.rec("rp.Doc", doc{ID: id, Tags: d.Tags}))
	}
	re.mustWrite(engine.Batch{Op: engine.OpPatch, Records: recs, Fields: []string{"tags"}})
	recs = nil
	for _, id := range pick(1 + rnd.IntN(4)) {
		delete(model, id)
		recs = append(recs, re.rec("rp.Doc", doc{ID: id}))
	}
	re.mustWrite(engine.Batch{Op: engine.OpRemove, Records: recs})
}

// compare runs one random query and checks it against the model.
func (re *repeatedEngine) compare(rnd *rand.Rand, model map[int64]doc, seed uint64, round int) {
	t := re.t
	pickTags := func() []string {
		n := 1 + rnd.IntN(3)
		out := make([]string, n)
		for i := range out {
			out[i] = modelTags[rnd.IntN(len(modelTags))]
		}
		return out
	}
	var filter, index string
	var match func(d doc) bool
	switch rnd.IntN(5) {
	case 0:
		tag := pickTags()[0]
		filter, index = fmt.Sprintf("tags = %q", tag), "tags"
		match = func(d doc) bool { return slices.Contains(d.Tags, tag) }
	case 1:
		tags := pickTags()
		filter, index = "tags in ("+quoteAll(tags)+")", "tags"
		match = func(d doc) bool {
			return slices.ContainsFunc(d.Tags, func(s string) bool { return slices.Contains(tags, s) })
		}
	case 2:
		tags, team := pickTags(), modelTeams[rnd.IntN(len(modelTeams))]
		filter, index = fmt.Sprintf("team = %q and tags in (%s)", team, quoteAll(tags)), "team_tags"
		match = func(d doc) bool {
			return d.Team == team && slices.ContainsFunc(d.Tags, func(s string) bool { return slices.Contains(tags, s) })
		}
	case 3:
		a, b := int32(rnd.IntN(7)-3), int32(rnd.IntN(7)-3)
		filter, index = fmt.Sprintf("nums in (%d, %d)", a, b), "nums"
		match = func(d doc) bool { return slices.Contains(d.Nums, a) || slices.Contains(d.Nums, b) }
	default:
		tags := pickTags()
		filter, index = fmt.Sprintf("tags = %q and tags = %q", tags[0], tags[len(tags)-1]), "tags"
		match = func(d doc) bool {
			return slices.Contains(d.Tags, tags[0]) && slices.Contains(d.Tags, tags[len(tags)-1])
		}
	}
	var want []int64
	for id, d := range model {
		if match(d) {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	q := &pb.Query{Type: "rp.Doc", Filter: filter, Explain: true}
	desc := rnd.IntN(3) == 0
	if desc {
		q.Order = &pb.Order{Index: index, Descending: true}
	}
	got, plan := re.ids(q, uint32(rnd.IntN(4))) //nolint:gosec // small
	if plan.GetIndex() != index {
		t.Fatalf("seed %d round %d: %s: plan %s, want index %s", seed, round, filter, plan.GetText(), index)
	}
	// Results come in index order, each once: as a set they are the model's.
	if dup := firstDup(got); dup != 0 {
		t.Fatalf("seed %d round %d: %s (desc %v): record %d returned twice: %v", seed, round, filter, desc, dup, got)
	}
	sorted := slices.Sorted(slices.Values(got))
	if !slices.Equal(sorted, want) {
		t.Fatalf("seed %d round %d: %s (desc %v, plan %s):\n got %v\nwant %v", seed, round, filter, desc, plan.GetText(), sorted, want)
	}
	if scanned := re.scanIDs(&pb.Query{Type: "rp.Doc", Filter: filter}); !slices.Equal(scanned, want) {
		t.Fatalf("seed %d round %d: scan of %s:\n got %v\nwant %v", seed, round, filter, scanned, want)
	}
	if n := re.count(&pb.Query{Type: "rp.Doc", Filter: filter}); n != uint64(len(want)) {
		t.Fatalf("seed %d round %d: count of %s: %d, want %d", seed, round, filter, n, len(want))
	}
}

// scanIDs runs q as a Scan and returns the ids of its records, sorted;
// it fails on an id returned twice.
func (re *repeatedEngine) scanIDs(q *pb.Query) []int64 {
	re.t.Helper()
	md := re.e.Schema().Types[protoreflect.FullName(q.Type)].Desc
	var out []int64
	err := re.e.Scan(re.t.Context(), &pb.ScanRequest{Query: q}, func(resp *pb.ScanResponse) error {
		for _, a := range resp.Records {
			m := dynamicpb.NewMessage(md)
			if err := a.UnmarshalTo(m); err != nil {
				return err
			}
			out = append(out, m.Get(md.Fields().ByName("id")).Int())
		}
		return nil
	})
	if err != nil {
		re.t.Fatalf("scan %v: %v", q, err)
	}
	if dup := firstDup(out); dup != 0 {
		re.t.Fatalf("scan %v: record %d returned twice", q, dup)
	}
	slices.Sort(out)
	return out
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func firstDup(ids []int64) int64 {
	seen := map[int64]bool{}
	for _, id := range ids {
		if seen[id] {
			return id
		}
		seen[id] = true
	}
	return 0
}

// TestRepeatedIndexLargeBatchesReadAtOnce writes batches of 2,000 records
// of ten tags on one Writer, inserts and then upserts that change every
// record's tags, whose index writes (about 100 KiB a batch) the Pebble
// store applies on a goroutine of its own, and queries by tag right after
// each Apply, before the Writer syncs: each query returns the records the
// model holds, as the writer's own later batches see them. Run with
// -repeated.seed=N to replay a failure.
func TestRepeatedIndexLargeBatchesReadAtOnce(t *testing.T) {
	seed := *repeatedSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	re := openRepeated(t, st)
	rnd := rand.New(rand.NewPCG(seed, 35))
	model := map[int64][]string{}
	w := re.e.NewWriter()
	defer w.Close()
	const batch = 2000
	// Rising keys put a batch's entries of one tag in one group of the
	// Pebble store; scattered keys put each in a group of its own; mixed
	// keys change from one to the other a quarter of the way through the
	// batch.
	key := func(round, i int) int64 {
		id := int64(round/2*batch + i)
		if kind := round / 2 % 3; kind == 1 || kind == 2 && i >= batch/4 {
			return id * 65_537
		}
		return id
	}
	for round := range 12 {
		op := engine.OpInsert
		if round%2 == 1 {
			op = engine.OpUpsert // the records the round before inserted, with new tags
		}
		recs := make([]*anypb.Any, batch)
		for i := range recs {
			id := key(round, i)
			tags := make([]string, 10)
			for k := range tags {
				tags[k] = "t" + strconv.Itoa(rnd.IntN(50))
			}
			model[id] = tags
			recs[i] = re.rec("rp.Doc", doc{ID: id, Tags: tags})
		}
		if err := w.Apply(t.Context(), engine.Batch{Op: op, Records: recs}); err != nil {
			t.Fatalf("seed %d, round %d: %v", seed, round, err)
		}
		for range 3 {
			tag := "t" + strconv.Itoa(rnd.IntN(50))
			var want []int64
			for id, tags := range model {
				if slices.Contains(tags, tag) {
					want = append(want, id)
				}
			}
			slices.Sort(want)
			got, _ := re.ids(&pb.Query{Type: "rp.Doc", Filter: fmt.Sprintf("tags = %q", tag)}, 0)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, round %d: tags = %q right after Apply: %d records, want %d", seed, round, tag, len(got), len(want))
			}
		}
	}
	if _, err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	r, err := engine.Check(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("seed %d: store inconsistent: %v", seed, r.Problems)
	}
}
