package engine_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/internal/testschema"
)

var aggixSeed = flag.Uint64("aggix.seed", 0, "seed of TestAggregateIndexModel (0: from the clock)")

// aggixProto is aggProto's Row with aggregate indexes: several groupings,
// a group field with presence, no grouping at all, and integer, unsigned
// and float sums.
var aggixProto = strings.Replace(aggProto,
	`option (protobase.v1.record) = { primary_key: "id" index: { fields: "team" } };`,
	`option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "team" }
    aggregate: { name: "by_team" group_by: "team" sum: ["score", "hits", "bonus", "ratio"] }
    aggregate: { name: "by_level_active" group_by: ["level", "active"] sum: "score" }
    aggregate: { name: "by_bonus" group_by: "bonus" sum: "ratio" }
    aggregate: { name: "total" sum: ["score", "ratio"] }
    aggregate: { name: "by_color" group_by: "color" }
  };`, 1)

// aggixIndexes are the indexes of aggixProto with the functions each
// answers.
var aggixIndexes = []struct {
	name    string
	groupBy []string
	sums    []string
	// filter reads group fields only: the index answers under it.
	filter string
	keep   func(aggRow) bool
}{
	{"by_team", []string{"team"}, []string{"score", "hits", "bonus", "ratio"},
		`team in ("a", "b", "")`, func(r aggRow) bool { return r.Team == "a" || r.Team == "b" || r.Team == "" }},
	{"by_level_active", []string{"level", "active"}, []string{"score"},
		"level >= 2 and active = true or level = 0", func(r aggRow) bool { return r.Level >= 2 && r.Active || r.Level == 0 }},
	{"by_bonus", []string{"bonus"}, []string{"ratio"},
		"not bonus > 0", func(r aggRow) bool { return r.Bonus == nil || *r.Bonus <= 0 }},
	{"total", nil, []string{"score", "ratio"}, "", nil},
	{"by_color", []string{"color"}, nil, "", nil},
}

func openAggix(t *testing.T, st store.KV, opts engine.Options, files map[string]string) *aggEngine {
	t.Helper()
	e, err := engine.Open(t.Context(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if files != nil {
		if _, err := e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: files}); err != nil {
			t.Fatal(err)
		}
	}
	return &aggEngine{t: t, e: e}
}

// aggixStores runs f on a Pebble store and on an etcd store, each with
// aggixProto applied.
func aggixStores(t *testing.T, f func(t *testing.T, ae *aggEngine, st store.KV)) {
	files := map[string]string{"ag.proto": aggixProto}
	t.Run("pebble", func(t *testing.T) {
		st := pebbleStore(t)
		f(t, openAggix(t, st, engine.Options{}, files), st)
	})
	t.Run("etcd", func(t *testing.T) {
		st, err := etcd.Open(etcd.Options{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/agx/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, openAggix(t, st, engine.Options{}, files), st)
	})
}

// records encodes rows as ag.Row records.
func (ae *aggEngine) records(rows []aggRow) []*anypb.Any {
	rt := ae.e.Schema().Types[protoreflect.FullName("ag.Row")]
	recs := make([]*anypb.Any, len(rows))
	for i, r := range rows {
		js, err := json.Marshal(r)
		if err != nil {
			ae.t.Fatal(err)
		}
		if recs[i], err = testschema.Record(rt.Desc, string(js)); err != nil {
			ae.t.Fatal(err)
		}
	}
	return recs
}

// apply writes b, sending it again when the engine refused it for
// contention it did not resolve (store.ErrConflict, "retry the batch":
// nothing of it was applied), as a client does; on etcd a batch racing an
// aggregate index build can meet that.
func (ae *aggEngine) apply(b engine.Batch) {
	ae.t.Helper()
	for attempt := 0; ; attempt++ {
		w := ae.e.NewWriter()
		err := w.Apply(ae.t.Context(), b)
		if err == nil {
			_, err = w.Sync()
		}
		w.Close()
		if err == nil {
			return
		}
		if !errors.Is(err, store.ErrConflict) || attempt == 10 {
			ae.t.Fatal(err)
		}
	}
}

// aggixRound changes the model and the store alike: upserts (some of one
// key twice in a batch), updates, patches setting team and adding to
// score, removes, and inserts of new ids.
func aggixRound(ae *aggEngine, rnd *rand.Rand, model map[int64]aggRow, next *int64) {
	var up, upd, rm, patch []aggRow
	taken := map[int64]bool{}
	for id := range *next {
		r, ok := model[id]
		switch x := rnd.IntN(20); {
		case x == 0 && ok:
			rm = append(rm, r)
			delete(model, id)
			taken[id] = true
		case x < 3:
			r = randomAggRow(rnd, id)
			model[id] = r
			up = append(up, r)
		case x < 5 && ok:
			r = randomAggRow(rnd, id)
			model[id] = r
			upd = append(upd, r)
			taken[id] = true
		case x < 7 && ok:
			p := aggRow{ID: id, Team: aggTeams[rnd.IntN(len(aggTeams))], Score: rnd.Int64N(2001) - 1000}
			r.Team, r.Score = p.Team, r.Score+p.Score
			model[id] = r
			patch = append(patch, p)
			taken[id] = true
		}
	}
	// One key twice in one upsert batch: the second wins.
	if len(up) > 0 && !taken[up[0].ID] {
		r := randomAggRow(rnd, up[0].ID)
		model[r.ID] = r
		up = append(up, r)
	}
	var ins []aggRow
	for range 20 {
		r := randomAggRow(rnd, *next)
		model[r.ID] = r
		ins = append(ins, r)
		*next++
	}
	ae.write(engine.OpInsert, ins)
	for _, b := range []struct {
		op   engine.Op
		rows []aggRow
	}{{engine.OpUpsert, up}, {engine.OpUpdate, upd}, {engine.OpRemove, rm}} {
		if len(b.rows) > 0 {
			ae.write(b.op, b.rows)
		}
	}
	if len(patch) > 0 {
		ae.apply(engine.Batch{Op: engine.OpPatch, Records: ae.records(patch), Fields: []string{"team"}, Add: []string{"score"}})
	}
}

// compareIndexed asks each aggregate index's aggregation (its groups in a
// random order, count and random sums and means of its fields), checks the
// plan read the index, and compares the rows with brute force; the same
// aggregation with a filter every record passes is answered by a scan
// and compared too.
func (ae *aggEngine) compareIndexed(rnd *rand.Rand, rows []aggRow, seed uint64, round int) {
	t := ae.t
	for _, ix := range aggixIndexes {
		groupBy := append([]string(nil), ix.groupBy...)
		rnd.Shuffle(len(groupBy), func(i, j int) { groupBy[i], groupBy[j] = groupBy[j], groupBy[i] })
		funcs := []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}
		for _, s := range ix.sums {
			switch rnd.IntN(3) {
			case 0:
				funcs = append(funcs, &pb.AggregateFunction{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: s})
			case 1:
				funcs = append(funcs, &pb.AggregateFunction{Op: pb.AggregateOp_AGGREGATE_OP_AVG, Field: s})
			}
		}
		rnd.Shuffle(len(funcs), func(i, j int) { funcs[i], funcs[j] = funcs[j], funcs[i] })
		all := func(aggRow) bool { return true }
		cases := []struct {
			filter string
			keep   func(aggRow) bool
			index  bool
		}{{"", all, true}, {"id >= 0", all, false}}
		if ix.filter != "" {
			cases = append(cases, struct {
				filter string
				keep   func(aggRow) bool
				index  bool
			}{ix.filter, ix.keep, true}, struct {
				filter string
				keep   func(aggRow) bool
				index  bool
			}{ix.filter + " and id >= 0", ix.keep, false})
		}
		for _, c := range cases {
			want := modelRows(rows, c.keep, groupBy, funcs)
			resp, err := ae.aggregate(c.filter, &pb.Aggregate{GroupBy: groupBy, Functions: funcs})
			if err != nil {
				t.Fatalf("seed %d round %d: index %s %q by %v %v: %v", seed, round, ix.name, c.filter, groupBy, funcs, err)
			}
			plan := resp.GetPlan().GetText()
			if fromIndex := strings.HasPrefix(plan, "aggregate index "+ix.name+" "); fromIndex != c.index {
				t.Fatalf("seed %d round %d: %q by %v %v: plan %q", seed, round, c.filter, groupBy, funcs, plan)
			}
			compareRows(t, resp, want, fmt.Sprintf("seed %d round %d: %q by %v %v (plan %s)", seed, round, c.filter, groupBy, funcs, plan))
		}
	}
}

func compareRows(t *testing.T, resp *pb.QueryResponse, want [][2][]any, what string) {
	t.Helper()
	fail := func(why string) {
		t.Helper()
		t.Fatalf("%s: %s\n got %v\nwant %v", what, why, resp.Rows, want)
	}
	if len(resp.Rows) != len(want) {
		fail("row count")
	}
	for i, row := range resp.Rows {
		for j, v := range row.Group {
			if !sameValue(v.AsInterface(), want[i][0][j]) {
				fail("group " + strconv.Itoa(i))
			}
		}
		for j, v := range row.Values {
			if !sameValue(v.AsInterface(), want[i][1][j]) {
				fail(fmt.Sprintf("row %d value %d", i, j))
			}
		}
	}
}

// TestAggregateIndexModel writes random records, then rounds of upserts,
// updates, patches, removes and inserts, and after each compares the
// aggregations the aggregate indexes answer (and the same by scan, and
// random others) with brute force over the model. Run with
// -aggix.seed=N to replay.
func TestAggregateIndexModel(t *testing.T) {
	seed := *aggixSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	aggixStores(t, func(t *testing.T, ae *aggEngine, st store.KV) {
		t.Logf("seed %d (replay with -aggix.seed=%d)", seed, seed)
		rnd := rand.New(rand.NewPCG(seed, 35))
		model := map[int64]aggRow{}
		next := int64(0)
		for range 3 {
			var batch []aggRow
			for range 100 {
				r := randomAggRow(rnd, next)
				model[next] = r
				batch = append(batch, r)
				next++
			}
			ae.write(engine.OpInsert, batch)
		}
		for round := range 6 {
			if round > 0 {
				aggixRound(ae, rnd, model, &next)
			}
			rows := make([]aggRow, 0, len(model))
			for _, r := range model {
				rows = append(rows, r)
			}
			ae.compareIndexed(rnd, rows, seed, round)
			mustCheck(t, st, fmt.Sprintf("seed %d round %d", seed, round))
			for range 5 {
				ae.compareRandom(rnd, rows, seed, round)
			}
		}
	})
}

// mustCheck runs the checker on st and fails on any problem.
func mustCheck(t *testing.T, st store.KV, what string) *engine.CheckReport {
	t.Helper()
	r, err := engine.Check(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		var b strings.Builder
		r.WriteTo(&b)
		t.Fatalf("%s: check: %s", what, b.String())
	}
	return r
}

// TestAggregateIndexBuild adds aggregate indexes to a type holding records
// while writers keep changing them: the indexes are not read while they
// build, and once READY they agree with brute force and the checker.
func TestAggregateIndexBuild(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int64
		open func(t *testing.T) store.KV
	}{
		{"pebble", 3000, func(t *testing.T) store.KV {
			st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"etcd", 300, func(t *testing.T) store.KV {
			st, err := etcd.Open(etcd.Options{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/agb/"})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.open(t)
			t.Cleanup(func() { st.Close() })
			ae := openAggix(t, st, engine.Options{}, map[string]string{"ag.proto": aggProto})
			rnd := rand.New(rand.NewPCG(uint64(tc.n), 36))
			model := map[int64]aggRow{}
			var next int64
			for next < tc.n {
				var batch []aggRow
				for range 100 {
					r := randomAggRow(rnd, next)
					model[next] = r
					batch = append(batch, r)
					next++
				}
				ae.write(engine.OpInsert, batch)
			}
			if _, err := ae.e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"ag.proto": aggixProto}}); err != nil {
				t.Fatal(err)
			}
			sawBuilding := false
			for round := 0; ; round++ {
				ready := aggixReady(ae.e)
				if !ready {
					sawBuilding = true
					resp, err := ae.aggregate("", &pb.Aggregate{GroupBy: []string{"team"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}})
					if err != nil {
						t.Fatal(err)
					}
					// States only move from BUILDING to READY: by_team still
					// building after the read was building during it. (It
					// may be READY while others build.)
					plan := resp.GetPlan().GetText()
					if strings.HasPrefix(plan, "aggregate index") && aggixBuilding(ae.e, "by_team") {
						t.Fatalf("an index being built was read: %s", plan)
					}
				}
				aggixRound(ae, rnd, model, &next)
				if ready {
					break
				}
				if round > 2000 {
					t.Fatal("the aggregate indexes never became ready")
				}
			}
			if !sawBuilding {
				t.Log("the build ended before the first round")
			}
			rows := make([]aggRow, 0, len(model))
			for _, r := range model {
				rows = append(rows, r)
			}
			ae.compareIndexed(rnd, rows, uint64(tc.n), 0)
			mustCheck(t, st, "built")
		})
	}
}

// aggixBuilding reports whether ag.Row's index name is BUILDING.
func aggixBuilding(e *engine.Engine, name string) bool {
	ix, ok := e.Schema().Types["ag.Row"].Index(name)
	return ok && ix.State == pb.IndexState_INDEX_STATE_BUILDING
}

// aggixReady reports whether every aggregate index of ag.Row is READY.
func aggixReady(e *engine.Engine) bool {
	for _, ix := range e.Schema().Types["ag.Row"].Indexes {
		if ix.Aggregate && ix.State != pb.IndexState_INDEX_STATE_READY {
			return false
		}
	}
	return true
}

// TestAggregateIndexTwoServers: two engines sharing one etcd store, each
// with several streams, add records to one group at once; no addition is
// lost.
func TestAggregateIndexTwoServers(t *testing.T) {
	ep := etcdtest.Start(t, etcdtest.Roomy)
	var engines []*aggEngine
	for i := range 2 {
		st, err := etcd.Open(etcd.Options{Endpoints: []string{ep}, Prefix: "/ag2/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		files := map[string]string{"ag.proto": aggixProto}
		if i > 0 {
			files = nil // the first applied it
		}
		engines = append(engines, openAggix(t, st, engine.Options{}, files))
	}
	const streams, batches, per = 3, 10, 10
	errs := make(chan error, 2*streams)
	for s := range 2 * streams {
		ae := engines[s%2]
		go func() {
			w := ae.e.NewWriter()
			defer w.Close()
			for b := range batches {
				rows := make([]aggRow, per)
				for i := range rows {
					rows[i] = aggRow{ID: int64((s*batches+b)*per + i), Team: "hot", Score: 1, Ratio: 0.5}
				}
				if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: ae.records(rows)}); err != nil {
					errs <- err
					return
				}
			}
			_, err := w.Sync()
			errs <- err
		}()
	}
	for range 2 * streams {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	const n = 2 * streams * batches * per
	for _, ae := range engines {
		resp, err := ae.aggregate("", &pb.Aggregate{GroupBy: []string{"team"}, Functions: []*pb.AggregateFunction{
			{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}, {Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"}, {Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "ratio"}}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(resp.GetPlan().GetText(), "aggregate index by_team") || len(resp.Rows) != 1 ||
			resp.Rows[0].Values[0].GetNumberValue() != n || resp.Rows[0].Values[1].GetNumberValue() != n || resp.Rows[0].Values[2].GetNumberValue() != n/2 {
			t.Fatalf("got %v (plan %s), want count and sum %d", resp.Rows, resp.GetPlan().GetText(), n)
		}
	}
}

// TestAggregateIndexHostile: integer sums past int64 are kept (128 bits)
// and answered OUT_OF_RANGE, as a scan answers them, until removals bring
// them back in range; infinities and NaN leave a float sum when removed;
// more groups than the limit is RESOURCE_EXHAUSTED from the index too.
func TestAggregateIndexHostile(t *testing.T) {
	st := pebbleStore(t)
	ae := openAggix(t, st, engine.Options{MaxAggregateGroups: 50}, map[string]string{"ag.proto": aggixProto})
	big := []aggRow{{ID: 1, Team: "x", Score: math.MaxInt64}, {ID: 2, Team: "x", Score: math.MaxInt64}, {ID: 3, Team: "x", Score: math.MinInt64}, {ID: 4, Team: "x", Score: math.MinInt64}}
	ae.write(engine.OpInsert, big)
	sum := &pb.Aggregate{GroupBy: []string{"team"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"}}}
	resp, err := ae.aggregate("", sum)
	if err != nil || resp.Rows[0].Values[0].GetNumberValue() != -2 {
		t.Fatalf("max+max+min+min: %v %v", resp, err)
	}
	ae.write(engine.OpRemove, big[2:])
	for _, filter := range []string{"", "id > 0"} {
		_, err = ae.aggregate(filter, sum)
		if code, msg := apiCode(err); code != apierror.OutOfRange || !strings.Contains(msg, "sum(score) overflows int64") {
			t.Fatalf("%q: 2 × max: %v", filter, err)
		}
	}
	ae.write(engine.OpRemove, big[1:2])
	if resp, err = ae.aggregate("", sum); err != nil || resp.Rows[0].Values[0].GetStringValue() != strconv.FormatInt(math.MaxInt64, 10) {
		t.Fatalf("max: %v %v", resp, err)
	}
	rt := ae.e.Schema().Types["ag.Row"]
	var special []*anypb.Any
	for _, js := range []string{`{"id": "10", "team": "f", "ratio": "Infinity"}`, `{"id": "11", "team": "f", "ratio": "NaN"}`, `{"id": "12", "team": "f", "ratio": 2.5}`} {
		rec, err := testschema.Record(rt.Desc, js)
		if err != nil {
			t.Fatal(err)
		}
		special = append(special, rec)
	}
	ae.apply(engine.Batch{Op: engine.OpInsert, Records: special})
	fsum := &pb.Aggregate{GroupBy: []string{"team"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "ratio"}}}
	if resp, err = ae.aggregate(`team = "f"`, fsum); err != nil || resp.Rows[0].Values[0].GetStringValue() != "NaN" {
		t.Fatalf("scan NaN: %v %v", resp, err)
	}
	if resp, err = ae.aggregate("", fsum); err != nil || resp.Rows[0].Values[0].GetStringValue() != "NaN" {
		t.Fatalf("index NaN: %v %v", resp, err)
	}
	ae.write(engine.OpRemove, []aggRow{{ID: 11}})
	if resp, err = ae.aggregate("", fsum); err != nil || resp.Rows[0].Values[0].GetStringValue() != "Infinity" {
		t.Fatalf("index +Inf: %v %v", resp, err)
	}
	ae.write(engine.OpRemove, []aggRow{{ID: 10}})
	if resp, err = ae.aggregate("", fsum); err != nil || resp.Rows[0].Values[0].GetNumberValue() != 2.5 {
		t.Fatalf("index 2.5: %v %v", resp, err)
	}
	var many []aggRow
	for id := range int64(120) {
		many = append(many, aggRow{ID: 100 + id, Level: int32(id)})
	}
	ae.write(engine.OpInsert, many)
	_, err = ae.aggregate("", &pb.Aggregate{GroupBy: []string{"level", "active"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}})
	if code, msg := apiCode(err); code != apierror.ResourceExhausted || !strings.Contains(msg, "more than 50 groups") {
		t.Fatalf("groups: %v", err)
	}
	_, err = query(ae.e, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "ag.Row", Order: &pb.Order{Index: "by_team"}}})
	if code, msg := apiCode(err); code != apierror.InvalidArgument || !strings.Contains(msg, `index "by_team" of ag.Row is an aggregate index`) {
		t.Fatalf("order by an aggregate index: %v", err)
	}
	mustCheck(t, st, "hostile")
}

// TestAggregateIndexFloatCancellation: a large float value added to a
// group and removed again leaves the group's small values in its sum, as
// a scan finds them, and the checker finds the index whole (a plain
// float64 sum would round them away under the large one: 0 for 4). A group
// holding a large value and its opposite sums the small values between
// them, from the index and by a scan alike (a plain sum: 0 for 1).
func TestAggregateIndexFloatCancellation(t *testing.T) {
	st := pebbleStore(t)
	ae := openAggix(t, st, engine.Options{}, map[string]string{"ag.proto": aggixProto})
	ae.write(engine.OpInsert, []aggRow{{ID: 1, Team: "c", Ratio: 1e20}, {ID: 2, Team: "c", Ratio: 1}, {ID: 3, Team: "c", Ratio: 3},
		{ID: 4, Team: "d", Ratio: 1e20}, {ID: 5, Team: "d", Ratio: 1}, {ID: 6, Team: "d", Ratio: -1e20}})
	ae.write(engine.OpRemove, []aggRow{{ID: 1}})
	fsum := &pb.Aggregate{GroupBy: []string{"team"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "ratio"},
		{Op: pb.AggregateOp_AGGREGATE_OP_AVG, Field: "ratio"}}}
	for _, c := range []struct {
		team     string
		sum, avg float64
	}{{"c", 4, 2}, {"d", 1, 1.0 / 3}} {
		for _, filter := range []string{fmt.Sprintf("team = %q", c.team), fmt.Sprintf("id > 0 and team = %q", c.team)} { // the index, a scan
			resp, err := ae.aggregate(filter, fsum)
			if err != nil || len(resp.Rows) != 1 || resp.Rows[0].Values[0].GetNumberValue() != c.sum || resp.Rows[0].Values[1].GetNumberValue() != c.avg {
				t.Fatalf("filter %q: sum(ratio), avg(ratio) %v, %v; want %v, %v", filter, resp.GetRows(), err, c.sum, c.avg)
			}
		}
	}
	mustCheck(t, st, "cancellation")
}

// TestAggregateIndexCheckDamage: the checker reports an entry whose count
// differs, a group without its entry, and an entry of a group without
// records.
func TestAggregateIndexCheckDamage(t *testing.T) {
	st := pebbleStore(t)
	ae := openAggix(t, st, engine.Options{}, map[string]string{"ag.proto": aggixProto})
	ae.write(engine.OpInsert, []aggRow{{ID: 1, Team: "a", Score: 5}, {ID: 2, Team: "b", Score: 7}})
	mustCheck(t, st, "before")
	ix, _ := ae.e.Schema().Types["ag.Row"].Index("by_team")
	prefix := keyspace.IndexPrefix(ix.ID)
	group := func(team string) []byte {
		return binary.AppendUvarint(append(append(bytes.Clone(prefix), 1), nil...), uint64(len(team)))
	}
	keyA := append(group("a"), 'a')
	keyB := append(group("b"), 'b')
	keyZ := append(group("z"), 'z')
	val, found, err := st.Get(keyA, nil)
	if err != nil || !found {
		t.Fatalf("entry of group a: %v %v", found, err)
	}
	b := st.NewWriteBatch()
	damaged := bytes.Clone(val)
	damaged[7]++ // count 2
	b.Set(keyA, damaged)
	b.Delete(keyB)
	b.Set(keyZ, val)
	if err := st.ApplyBatch(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	r, err := engine.Check(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[engine.ProblemKind]bool{}
	for _, p := range r.Problems {
		if p.Index == "by_team" {
			kinds[p.Kind] = true
		}
	}
	if len(r.Problems) != 3 || !kinds[engine.ProblemAggregateMismatch] || !kinds[engine.ProblemMissingEntry] || !kinds[engine.ProblemStaleEntry] {
		var s strings.Builder
		r.WriteTo(&s)
		t.Fatalf("problems: %s", s.String())
	}
}

// TestAggregateIndexManyGroups: batches of 10,000 records in as many
// groups write them all and reads them back from the index; on etcd a
// batch whose groups pass the transaction's operations is refused whole,
// naming the limit to raise.
func TestAggregateIndexManyGroups(t *testing.T) {
	skipLargeInRaceRun(t)
	proto := strings.Replace(aggProto, ` index: { fields: "team" }`, ` aggregate: { name: "by_score" group_by: "score" sum: "hits" }`, 1)
	st := pebbleStore(t)
	ae := openAggix(t, st, engine.Options{}, map[string]string{"ag.proto": proto})
	const n = 20_000
	rows := make([]aggRow, n)
	for i := range rows {
		rows[i] = aggRow{ID: int64(i), Score: int64(n - i), Hits: 2}
	}
	ae.write(engine.OpInsert, rows[:n/2])
	ae.write(engine.OpInsert, rows[n/2:])
	resp, err := ae.aggregate("", &pb.Aggregate{GroupBy: []string{"score"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}, {Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "hits"}}})
	if err != nil || len(resp.Rows) != n || !strings.HasPrefix(resp.Plan.GetText(), "aggregate index by_score") ||
		resp.Rows[n-1].Group[0].GetNumberValue() != n || resp.Rows[n-1].Values[1].GetNumberValue() != 2 {
		t.Fatalf("%d rows, plan %s: %v", len(resp.GetRows()), resp.GetPlan().GetText(), err)
	}
	mustCheck(t, st, "20,000 groups")

	est, err := etcd.Open(etcd.Options{Endpoints: []string{etcdtest.Start(t, etcdtest.Limits{MaxTxnOps: 128, MaxRequestBytes: 1536 << 10})}, Prefix: "/agm/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	ee := openAggix(t, est, engine.Options{}, map[string]string{"ag.proto": proto})
	w := ee.e.NewWriter()
	defer w.Close()
	err = w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: ee.records(rows[:100])})
	if code, msg := apiCode(err); code != apierror.ResourceExhausted || !strings.Contains(msg, "max-txn-ops") {
		t.Fatalf("100 groups on etcd at 128 operations: %v", err)
	}
	ee.write(engine.OpInsert, rows[:30])
	mustCheck(t, est, "etcd")
}

// TestAggregateIndexFilterKinds: a filter on group fields of every scalar
// kind, tested on each group's values, agrees with the same filter
// tested on every record by a scan.
func TestAggregateIndexFilterKinds(t *testing.T) {
	const proto = `syntax = "proto3";
package gk;
import "protobase/v1/options.proto";
enum E { E_UNSPECIFIED = 0; E_ONE = 1; E_TWO = 2; }
message K {
  option (protobase.v1.record) = {
    primary_key: "id"
    aggregate: { name: "all" group_by: ["a", "b", "c", "d", "e", "f", "g", "h", "s"] sum: "n" }
  };
  int64 id = 1;
  sint64 a = 2;
  fixed32 b = 3;
  float c = 4;
  uint64 d = 5;
  double e = 6;
  sfixed64 f = 7;
  E g = 8;
  optional sint32 h = 9;
  bytes s = 10;
  int64 n = 11;
}
`
	st := pebbleStore(t)
	ae := openAggix(t, st, engine.Options{}, map[string]string{"gk.proto": proto})
	rt := ae.e.Schema().Types["gk.K"]
	rnd := rand.New(rand.NewPCG(4, 5))
	var recs []*anypb.Any
	for id := range 400 {
		h := ""
		if rnd.IntN(2) == 0 {
			h = fmt.Sprintf(`, "h": %d`, rnd.IntN(3)-1)
		}
		js := fmt.Sprintf(`{"id": %d, "a": %d, "b": %d, "c": %g, "d": %d, "e": %g, "f": %d, "g": %d, "s": %q, "n": %d%s}`,
			id, rnd.IntN(3)-1, rnd.IntN(2), float32(rnd.IntN(3))/4-0.25, rnd.IntN(2)<<40, float64(rnd.IntN(3))-1.5, rnd.IntN(3)-1, rnd.IntN(3),
			[]string{"", "eA==", "eHk="}[rnd.IntN(3)], id, h)
		rec, err := testschema.Record(rt.Desc, js)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	ae.apply(engine.Batch{Op: engine.OpInsert, Records: recs})
	groupBy := []string{"s", "h", "g", "f", "e", "d", "c", "b", "a"}
	agg := func(filter string, a *pb.Aggregate) (*pb.QueryResponse, error) {
		return query(ae.e, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "gk.K", Filter: filter, Aggregate: a, Explain: true}})
	}
	fns := []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}, {Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "n"}}
	for _, filter := range []string{"a < 0", "b = 1", "c > 0", "c = -0.25", "d >= 1099511627776", "e in (-0.5, 0.5)", "f != 0",
		"g = 1", "h = 0", "h < 0", `s = "x"`, `s prefix "x"`, "a = 0 and (d = 0 or e > 0) and not g = 2"} {
		idx, err := agg(filter, &pb.Aggregate{GroupBy: groupBy, Functions: fns})
		if err != nil {
			t.Fatalf("%q: %v", filter, err)
		}
		scan, err := agg(filter+" and id >= 0", &pb.Aggregate{GroupBy: groupBy, Functions: fns})
		if err != nil {
			t.Fatalf("%q by scan: %v", filter, err)
		}
		if !strings.HasPrefix(idx.Plan.GetText(), "aggregate index all [1 range] filter: ") || strings.HasPrefix(scan.Plan.GetText(), "aggregate index") {
			t.Fatalf("%q: plans %q and %q", filter, idx.Plan.GetText(), scan.Plan.GetText())
		}
		if len(idx.Rows) == 0 || fmt.Sprint(idx.Rows) != fmt.Sprint(scan.Rows) {
			t.Fatalf("%q: from the index %d rows %v\nby scan %d rows %v", filter, len(idx.Rows), idx.Rows, len(scan.Rows), scan.Rows)
		}
	}
}
