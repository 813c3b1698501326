package engine_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
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

var aggSeed = flag.Uint64("agg.seed", 0, "seed of TestAggregateModel (0: from the clock)")

const aggProto = `syntax = "proto3";
package ag;
import "protobase/v1/options.proto";
import "google/protobuf/timestamp.proto";
enum Color { COLOR_UNSPECIFIED = 0; RED = 1; BLUE = 2; }
message Inner { string city = 1; }
message Row {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "team" } };
  int64 id = 1;
  string team = 2;
  int32 level = 3;
  int64 score = 4;
  uint64 hits = 5;
  double ratio = 6;
  optional int32 bonus = 7;
  bool active = 8;
  google.protobuf.Timestamp at = 9;
  Color color = 10;
  repeated string tags = 11;
  Inner inner = 12;
}
`

// aggRow is the model of one ag.Row.
type aggRow struct {
	ID     int64    `json:"id,string"`
	Team   string   `json:"team,omitempty"`
	Level  int32    `json:"level,omitempty"`
	Score  int64    `json:"score,omitempty,string"`
	Hits   uint64   `json:"hits,omitempty,string"`
	Ratio  float64  `json:"ratio,omitempty"`
	Bonus  *int32   `json:"bonus,omitempty"`
	Active bool     `json:"active,omitempty"`
	At     *string  `json:"at,omitempty"`
	Color  string   `json:"color,omitempty"`
	Tags   []string `json:"tags,omitempty"`
}

type aggEngine struct {
	t *testing.T
	e *engine.Engine
	// flush, on Pebble, writes the memtable to a table: tables of
	// separate key ranges let an aggregate read parts in parallel.
	flush func() error
	// parallel is the most parts any aggregate read.
	parallel uint32
}

func openAgg(t *testing.T, st store.KV, opts engine.Options) *aggEngine {
	t.Helper()
	e, err := engine.Open(t.Context(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"ag.proto": aggProto}}); err != nil {
		t.Fatal(err)
	}
	return &aggEngine{t: t, e: e}
}

// aggStores runs f on a Pebble store and on an etcd store.
func aggStores(t *testing.T, opts engine.Options, f func(t *testing.T, ae *aggEngine)) {
	t.Run("pebble", func(t *testing.T) {
		st := pebbleStore(t)
		ae := openAgg(t, st, opts)
		ae.flush = st.Flush
		f(t, ae)
	})
	t.Run("etcd", func(t *testing.T) {
		st, err := etcd.Open(etcd.Options{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/ag/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, openAgg(t, st, opts))
	})
}

func (ae *aggEngine) write(op engine.Op, rows []aggRow) {
	ae.t.Helper()
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
	ae.apply(engine.Batch{Op: op, Records: recs})
}

func (ae *aggEngine) aggregate(filter string, a *pb.Aggregate) (*pb.QueryResponse, error) {
	return query(ae.e, ae.t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "ag.Row", Filter: filter, Aggregate: a, Explain: true}})
}

// aggTeams are the values of team: besides short ones, strings that share
// their first and last 8 bytes (told apart by their length), one that
// fills 16 bytes and one past it, and long ones differing only in the
// middle.
var aggTeams = []string{"a", "b", "c", "d", "", "abcd", "abcde", "aaaaaaaaa", "aaaaaaaaaa",
	"0123456789abcdef", "0123456789abcdef0", "a long team name, X, to group by", "a long team name, Y, to group by"}

func randomAggRow(rnd *rand.Rand, id int64) aggRow {
	r := aggRow{ID: id, Team: aggTeams[rnd.IntN(len(aggTeams))], Level: int32(rnd.IntN(4)),
		Score: rnd.Int64N(2_000_001) - 1_000_000, Hits: rnd.Uint64N(1 << 40), Ratio: float64(rnd.IntN(1000)) / 8,
		Active: rnd.IntN(2) == 0, Color: []string{"COLOR_UNSPECIFIED", "RED", "BLUE"}[rnd.IntN(3)]}
	if rnd.IntN(2) == 0 {
		b := int32(rnd.IntN(7) - 3)
		r.Bonus = &b
	}
	if rnd.IntN(4) > 0 {
		at := time.Unix(1_700_000_000+rnd.Int64N(1000), int64(rnd.IntN(3))*250_000_000).UTC().Format(time.RFC3339Nano)
		r.At = &at
	}
	return r
}

// aggFilters are filters with their model; one of them uses the team index.
var aggFilters = []struct {
	text string
	f    func(aggRow) bool
}{
	{"", func(aggRow) bool { return true }},
	{"level >= 2", func(r aggRow) bool { return r.Level >= 2 }},
	{`team = "b"`, func(r aggRow) bool { return r.Team == "b" }},
	{"score < 0 and active = true", func(r aggRow) bool { return r.Score < 0 && r.Active }},
	{"level = 9", func(aggRow) bool { return false }},
}

var aggGroupFields = []string{"team", "level", "active", "bonus", "color"}

// aggFuncs are the functions the model computes.
var aggFuncs = []*pb.AggregateFunction{
	{Op: pb.AggregateOp_AGGREGATE_OP_COUNT},
	{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"},
	{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "hits"},
	{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "bonus"},
	{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "ratio"},
	{Op: pb.AggregateOp_AGGREGATE_OP_AVG, Field: "score"},
	{Op: pb.AggregateOp_AGGREGATE_OP_AVG, Field: "ratio"},
	{Op: pb.AggregateOp_AGGREGATE_OP_MIN, Field: "team"},
	{Op: pb.AggregateOp_AGGREGATE_OP_MAX, Field: "score"},
	{Op: pb.AggregateOp_AGGREGATE_OP_MIN, Field: "at"},
	{Op: pb.AggregateOp_AGGREGATE_OP_MAX, Field: "at"},
	{Op: pb.AggregateOp_AGGREGATE_OP_COUNT, Field: "bonus"},
	{Op: pb.AggregateOp_AGGREGATE_OP_MIN, Field: "color"},
}

// groupValue is the JSON value of field of r, as rows carry it.
func groupValue(r aggRow, field string) any {
	switch field {
	case "team":
		return r.Team
	case "level":
		return float64(r.Level)
	case "active":
		return r.Active
	case "bonus":
		if r.Bonus == nil {
			return nil
		}
		return float64(*r.Bonus)
	}
	return r.Color
}

// modelValue computes one function over rows, as JSON values.
func modelValue(fn *pb.AggregateFunction, rows []aggRow) any {
	var vals []aggRow
	for _, r := range rows {
		if fn.Field == "bonus" && r.Bonus == nil || fn.Field == "at" && r.At == nil {
			continue
		}
		vals = append(vals, r)
	}
	if fn.Op == pb.AggregateOp_AGGREGATE_OP_COUNT {
		if fn.Field == "" {
			return float64(len(rows))
		}
		return float64(len(vals))
	}
	if len(vals) == 0 {
		return nil
	}
	num := func(r aggRow) float64 {
		switch fn.Field {
		case "score":
			return float64(r.Score)
		case "hits":
			return float64(r.Hits)
		case "bonus":
			return float64(*r.Bonus)
		}
		return r.Ratio
	}
	switch fn.Op {
	case pb.AggregateOp_AGGREGATE_OP_SUM, pb.AggregateOp_AGGREGATE_OP_AVG:
		var s float64
		for _, r := range vals {
			s += num(r)
		}
		if fn.Op == pb.AggregateOp_AGGREGATE_OP_AVG {
			return s / float64(len(vals))
		}
		return s
	}
	sign := 1
	if fn.Op == pb.AggregateOp_AGGREGATE_OP_MAX {
		sign = -1
	}
	best := vals[0]
	for _, r := range vals[1:] {
		var c int
		switch fn.Field {
		case "team":
			c = strings.Compare(r.Team, best.Team)
		case "score":
			c = cmp.Compare(r.Score, best.Score)
		case "color":
			c = cmp.Compare(colorNum(r.Color), colorNum(best.Color))
		case "at":
			ra, _ := time.Parse(time.RFC3339Nano, *r.At)
			ba, _ := time.Parse(time.RFC3339Nano, *best.At)
			c = ra.Compare(ba)
		}
		if c*sign < 0 {
			best = r
		}
	}
	switch fn.Field {
	case "team":
		return best.Team
	case "score":
		return float64(best.Score)
	case "color":
		return best.Color
	}
	return *best.At
}

func colorNum(c string) int {
	return map[string]int{"COLOR_UNSPECIFIED": 0, "RED": 1, "BLUE": 2}[c]
}

// modelRows is the brute-force answer: groups in the order rows have.
func modelRows(rows []aggRow, keep func(aggRow) bool, groupBy []string, funcs []*pb.AggregateFunction) [][2][]any {
	groups := map[string][]aggRow{}
	keys := map[string][]any{}
	for _, r := range rows {
		if !keep(r) {
			continue
		}
		var g []any
		for _, f := range groupBy {
			g = append(g, groupValue(r, f))
		}
		k := fmt.Sprint(g...)
		groups[k] = append(groups[k], r)
		keys[k] = g
	}
	if len(groupBy) == 0 && len(groups) == 0 {
		groups[""] = nil
		keys[""] = nil
	}
	var out [][2][]any
	for k, rs := range groups {
		var vals []any
		for _, fn := range funcs {
			vals = append(vals, modelValue(fn, rs))
		}
		out = append(out, [2][]any{keys[k], vals})
	}
	slices.SortFunc(out, func(a, b [2][]any) int {
		for i, f := range groupBy {
			if c := compareModel(f, a[0][i], b[0][i]); c != 0 {
				return c
			}
		}
		return 0
	})
	return out
}

func compareModel(field string, a, b any) int {
	if a == nil || b == nil {
		return cmpBoolTest(a != nil, b != nil)
	}
	switch x := a.(type) {
	case string:
		if field == "color" {
			return cmp.Compare(colorNum(x), colorNum(b.(string)))
		}
		return strings.Compare(x, b.(string))
	case float64:
		return cmp.Compare(x, b.(float64))
	case bool:
		return cmpBoolTest(x, b.(bool))
	}
	return 0
}

func cmpBoolTest(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// sameValue compares a row's value with the model's; sums and means of
// doubles may differ in rounding with the order the parts add in.
func sameValue(got, want any) bool {
	g, gok := got.(float64)
	w, wok := want.(float64)
	if gok && wok {
		return g == w || math.Abs(g-w) <= 1e-9*math.Max(math.Abs(g), math.Abs(w))
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}

// TestAggregateModel writes random records, updates and removes some, and
// compares aggregates of random filters, groupings and functions with a
// brute-force computation over the model. Run with -agg.seed=N to replay.
func TestAggregateModel(t *testing.T) {
	seed := *aggSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	aggStores(t, engine.Options{}, func(t *testing.T, ae *aggEngine) {
		t.Logf("seed %d (replay with -agg.seed=%d)", seed, seed)
		rnd := rand.New(rand.NewPCG(seed, 34))
		model := map[int64]aggRow{}
		for from := int64(0); from < 400; from += 100 {
			var batch []aggRow
			for id := from; id < from+100; id++ {
				r := randomAggRow(rnd, id)
				model[id] = r
				batch = append(batch, r)
			}
			ae.write(engine.OpInsert, batch)
			if ae.flush != nil {
				if err := ae.flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		for round := range 4 {
			if round > 0 {
				var up, rm []aggRow
				for id := range int64(400) {
					r, ok := model[id]
					switch x := rnd.IntN(10); {
					case x == 0 && ok:
						rm = append(rm, r)
						delete(model, id)
					case x < 3:
						r = randomAggRow(rnd, id)
						model[id] = r
						up = append(up, r)
					}
				}
				ae.write(engine.OpUpsert, up)
				if len(rm) > 0 {
					ae.write(engine.OpRemove, rm)
				}
			}
			rows := make([]aggRow, 0, len(model))
			for _, r := range model {
				rows = append(rows, r)
			}
			for range 25 {
				ae.compareRandom(rnd, rows, seed, round)
			}
		}
		t.Logf("at most %d parts in parallel", ae.parallel)
		if ae.flush != nil && ae.parallel < 2 {
			t.Errorf("no aggregate read parts in parallel")
		}
	})
}

func (ae *aggEngine) compareRandom(rnd *rand.Rand, rows []aggRow, seed uint64, round int) {
	t := ae.t
	flt := aggFilters[rnd.IntN(len(aggFilters))]
	var groupBy []string
	for _, i := range rnd.Perm(len(aggGroupFields))[:rnd.IntN(3)] {
		groupBy = append(groupBy, aggGroupFields[i])
	}
	var funcs []*pb.AggregateFunction
	for _, i := range rnd.Perm(len(aggFuncs))[:1+rnd.IntN(5)] {
		funcs = append(funcs, aggFuncs[i])
	}
	resp, err := ae.aggregate(flt.text, &pb.Aggregate{GroupBy: groupBy, Functions: funcs})
	if err != nil {
		t.Fatalf("seed %d round %d: %q by %v %v: %v", seed, round, flt.text, groupBy, funcs, err)
	}
	want := modelRows(rows, flt.f, groupBy, funcs)
	ae.parallel = max(ae.parallel, resp.GetPlan().GetParallelism())
	fail := func(why string) {
		t.Helper()
		t.Fatalf("seed %d round %d: %q by %v %v (plan %s): %s\n got %v\nwant %v", seed, round, flt.text, groupBy, funcs, resp.GetPlan().GetText(), why, resp.Rows, want)
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

// TestAggregateRefusals: fields an aggregate cannot read, and what it
// cannot be combined with, are INVALID_ARGUMENT naming the field.
func TestAggregateRefusals(t *testing.T) {
	st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ae := openAgg(t, st, engine.Options{})
	count := []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}
	for _, c := range []struct {
		q     *pb.Query
		field string
		msg   string
	}{
		{&pb.Query{Aggregate: &pb.Aggregate{GroupBy: []string{"nope"}, Functions: count}}, "query.aggregate.group_by[0]", `"nope"`},
		{&pb.Query{Aggregate: &pb.Aggregate{GroupBy: []string{"team", "tags"}, Functions: count}}, "query.aggregate.group_by[1]", "repeated"},
		{&pb.Query{Aggregate: &pb.Aggregate{GroupBy: []string{"inner"}, Functions: count}}, "query.aggregate.group_by[0]", "message"},
		{&pb.Query{Aggregate: &pb.Aggregate{GroupBy: []string{"at"}, Functions: count}}, "query.aggregate.group_by[0]", "message"},
		{&pb.Query{Aggregate: &pb.Aggregate{Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "team"}}}}, "query.aggregate.functions[0].field", "not a number"},
		{&pb.Query{Aggregate: &pb.Aggregate{Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_AVG, Field: "at"}}}}, "query.aggregate.functions[0].field", "message"},
		{&pb.Query{Aggregate: &pb.Aggregate{Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_MIN, Field: "tags"}}}}, "query.aggregate.functions[0].field", "repeated"},
		{&pb.Query{Aggregate: &pb.Aggregate{Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_SUM}}}}, "query.aggregate.functions[0].field", "needs a field"},
		{&pb.Query{Aggregate: &pb.Aggregate{}}, "query.aggregate.functions", "at least one"},
		{&pb.Query{Aggregate: &pb.Aggregate{Functions: count}, Limit: 3}, "query.limit", "limit"},
		{&pb.Query{Aggregate: &pb.Aggregate{Functions: count}, Count: true}, "query.count", "count"},
	} {
		c.q.Type = "ag.Row"
		_, err := query(ae.e, t.Context(), &pb.QueryRequest{Query: c.q})
		var ae *apierror.Error
		if !asAPI(err, &ae) || ae.Code != apierror.InvalidArgument || ae.Field != c.field || !strings.Contains(ae.Msg, c.msg) {
			t.Errorf("%v: got %v, want INVALID_ARGUMENT on %s saying %s", c.q, err, c.field, c.msg)
		}
	}
	err = ae.e.Scan(t.Context(), &pb.ScanRequest{Query: &pb.Query{Type: "ag.Row", Aggregate: &pb.Aggregate{Functions: count}}},
		func(*pb.ScanResponse) error { return nil })
	if code, msg := apiCode(err); code != apierror.InvalidArgument || !strings.Contains(msg, "only Query answers aggregates") {
		t.Errorf("scan with aggregate: %v", err)
	}
	sent := false
	var qerr *pb.QueryError
	err = ae.e.Search(t.Context(), func() (*pb.SearchRequest, error) {
		if sent {
			return nil, io.EOF
		}
		sent = true
		return &pb.SearchRequest{Queries: []*pb.Query{{Type: "ag.Row", Aggregate: &pb.Aggregate{Functions: count}}}}, nil
	}, func(r *pb.SearchResponse) error {
		if len(r.Errors) > 0 {
			qerr = r.Errors[0]
		}
		return nil
	})
	if err != nil || qerr == nil || !strings.Contains(qerr.GetMessage(), "only Query answers aggregates") {
		t.Errorf("search with aggregate: %v, query error %v", err, qerr)
	}
}

func asAPI(err error, out **apierror.Error) bool { return errors.As(err, out) }

func apiCode(err error) (apierror.Code, string) {
	var ae *apierror.Error
	if !errors.As(err, &ae) {
		return apierror.OK, fmt.Sprint(err)
	}
	return ae.Code, ae.Msg
}

// TestAggregateBounds: a grouping past the group limit is RESOURCE_EXHAUSTED
// naming the limit, an integer sum past int64 is OUT_OF_RANGE naming the
// field, and an empty input still answers count 0.
func TestAggregateBounds(t *testing.T) {
	aggStores(t, engine.Options{MaxAggregateGroups: 50}, func(t *testing.T, ae *aggEngine) {
		resp, err := ae.aggregate("", &pb.Aggregate{Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}, {Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"}}})
		if err != nil || len(resp.Rows) != 1 || resp.Rows[0].Values[0].GetNumberValue() != 0 || resp.Rows[0].Values[1].GetNullValue() != 0 || resp.Rows[0].Values[1].AsInterface() != nil {
			t.Fatalf("empty: %v %v", resp, err)
		}
		var rows []aggRow
		for id := range int64(120) {
			rows = append(rows, aggRow{ID: id, Score: math.MaxInt64 / 100, Hits: math.MaxUint64 / 100, Level: int32(id)})
		}
		ae.write(engine.OpInsert, rows)
		_, err = ae.aggregate("", &pb.Aggregate{GroupBy: []string{"level"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}})
		if code, msg := apiCode(err); code != apierror.ResourceExhausted || !strings.Contains(msg, "more than 50 groups") {
			t.Fatalf("groups: %v", err)
		}
		for _, f := range []string{"score", "hits"} {
			_, err = ae.aggregate("", &pb.Aggregate{Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: f}}})
			if code, msg := apiCode(err); code != apierror.OutOfRange || !strings.Contains(msg, "sum("+f+") overflows") {
				t.Fatalf("sum %s: %v", f, err)
			}
		}
		// The sum of 99 of them fits, whatever order the parts add in; the
		// mean of all of them is still a double.
		resp, err = ae.aggregate("level < 99", &pb.Aggregate{Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"}, {Op: pb.AggregateOp_AGGREGATE_OP_AVG, Field: "score"}}})
		if err != nil || resp.Rows[0].Values[0].GetStringValue() != strconv.FormatInt(99*(math.MaxInt64/100), 10) {
			t.Fatalf("sum of 99: %v %v", resp, err)
		}
		resp, err = ae.aggregate("level < 40", &pb.Aggregate{GroupBy: []string{"level"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}})
		if err != nil || len(resp.Rows) != 40 || !strings.Contains(resp.Plan.GetText(), "aggregate group by level: count() parallel") || resp.Plan.GetParallelism() == 0 {
			t.Fatalf("40 groups: %v %v", resp.GetPlan(), err)
		}
	})
}

// TestAggregateCanceled: an aggregation, and a count, whose context is
// canceled return the context's error instead of an answer.
func TestAggregateCanceled(t *testing.T) {
	aggStores(t, engine.Options{}, func(t *testing.T, ae *aggEngine) {
		rows := make([]aggRow, 300)
		for i := range rows {
			rows[i] = aggRow{ID: int64(i), Team: aggTeams[i%len(aggTeams)], Score: int64(i)}
		}
		ae.write(engine.OpInsert, rows)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		fns := []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}, {Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"}}
		for _, q := range []*pb.Query{
			{Type: "ag.Row", Aggregate: &pb.Aggregate{Functions: fns}},
			{Type: "ag.Row", Aggregate: &pb.Aggregate{GroupBy: []string{"team"}, Functions: fns}},
			{Type: "ag.Row", Filter: "score >= 10", Count: true},
		} {
			if resp, err := query(ae.e, ctx, &pb.QueryRequest{Query: q}); !errors.Is(err, context.Canceled) {
				t.Fatalf("%v: %v, %v; want the context's error", q, resp, err)
			}
		}
	})
}

// TestAggregateManyGroups: a grouping of 120,000 distinct values against
// the default limit of 100,000 groups is RESOURCE_EXHAUSTED naming it,
// and a filter that leaves fewer groups answers them all.
func TestAggregateManyGroups(t *testing.T) {
	skipLargeInRaceRun(t)
	st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ae := openAgg(t, st, engine.Options{})
	for from := int64(0); from < 120_000; from += 10_000 {
		rows := make([]aggRow, 0, 10_000)
		for id := from; id < from+10_000; id++ {
			rows = append(rows, aggRow{ID: id, Score: id})
		}
		ae.write(engine.OpInsert, rows)
	}
	fns := []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}
	_, err = ae.aggregate("", &pb.Aggregate{GroupBy: []string{"score"}, Functions: fns})
	if code, msg := apiCode(err); code != apierror.ResourceExhausted || !strings.Contains(msg, "more than 100000 groups") {
		t.Fatalf("120,000 groups: %v", err)
	}
	resp, err := ae.aggregate("score < 100000", &pb.Aggregate{GroupBy: []string{"score"}, Functions: fns})
	if err != nil || len(resp.Rows) != 100_000 || resp.Rows[99_999].Group[0].GetNumberValue() != 99_999 {
		t.Fatalf("100,000 groups: %d rows, %v", len(resp.GetRows()), err)
	}
	for i, r := range resp.Rows {
		if r.Group[0].GetNumberValue() != float64(i) || r.Values[0].GetNumberValue() != 1 {
			t.Fatalf("100,000 groups: row %d is %v", i, r)
		}
	}
}
