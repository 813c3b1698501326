package engine_test

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

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

var expirySeed = flag.Uint64("expiry.seed", 0, "seed of TestExpiryModel (0: from the clock)")

// expiryProto has a type expiring at a Timestamp, with an index, and one
// expiring at an integer of milliseconds.
const expiryProto = `syntax = "proto3";
package tt;
import "protobase/v1/options.proto";
import "google/protobuf/timestamp.proto";
message Session {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "team" }
    ttl: { field: "expires_at" }
  };
  int64 id = 1;
  string team = 2;
  google.protobuf.Timestamp expires_at = 3;
  int64 score = 4;
}
message Token {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "handle" unique: true }
    ttl: { field: "exp_ms" unit: TTL_UNIT_MILLISECONDS }
  };
  int64 id = 1;
  int64 exp_ms = 2;
  int64 score = 3;
  optional string handle = 4;
}
`

// expiryBase is the model clock's start.
var expiryBase = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// expiryEngine is an engine of expiryProto whose clock the test sets.
type expiryEngine struct {
	t   *testing.T
	e   *engine.Engine
	st  store.KV
	now atomic.Int64 // Unix nanoseconds
}

func (xe *expiryEngine) clock() time.Time { return time.Unix(0, xe.now.Load()).UTC() }

// newExpiryEngine returns an expiryEngine on st with its clock at
// expiryBase; open starts its engine.
func newExpiryEngine(t *testing.T, st store.KV) *expiryEngine {
	xe := &expiryEngine{t: t, st: st}
	xe.now.Store(expiryBase.UnixNano())
	return xe
}

// open starts xe's engine with opts (the reaper off; the test's clock
// unless opts has one) and applies expiryProto.
func (xe *expiryEngine) open(opts engine.Options) *expiryEngine {
	t := xe.t
	if opts.Now == nil {
		opts.Now = xe.clock
	}
	opts.ReapInterval = -1
	e, err := engine.Open(t.Context(), xe.st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"tt.proto": expiryProto}}); err != nil {
		t.Fatal(err)
	}
	xe.e = e
	return xe
}

// expiryPebble opens a synced Pebble store in a directory of the test's.
func expiryPebble(t *testing.T) store.KV {
	st, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// expiryStores runs f on a Pebble store and on an etcd store.
func expiryStores(t *testing.T, f func(t *testing.T, xe *expiryEngine)) {
	open := func(t *testing.T, st store.KV) *expiryEngine {
		return newExpiryEngine(t, st).open(engine.Options{WatchRetention: time.Hour})
	}
	t.Run("pebble", func(t *testing.T) { f(t, open(t, expiryPebble(t))) })
	t.Run("etcd", func(t *testing.T) {
		f(t, open(t, etcdStore(t, etcdtest.Start(t, etcdtest.Roomy), "/tt/")))
	})
}

// etcdStore opens a store on the etcd member at endpoint, under prefix,
// closed when the test ends.
func etcdStore(t *testing.T, endpoint, prefix string) store.KV {
	t.Helper()
	st, err := etcd.Open(etcd.Options{Endpoints: []string{endpoint}, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// expiring is the model of one record: its expiry in Unix nanoseconds
// (0: never; the test's expiries all fit).
type expiring struct {
	id, score int64
	team      string
	exp       int64
}

func (xe *expiryEngine) rec(typeName string, js string) *anypb.Any {
	xe.t.Helper()
	a, err := testschema.Record(xe.e.Schema().Types[protoreflect.FullName(typeName)].Desc, js)
	if err != nil {
		xe.t.Fatalf("%s %s: %v", typeName, js, err)
	}
	return a
}

func (xe *expiryEngine) session(r expiring) *anypb.Any {
	js := fmt.Sprintf(`{"id":%d,"team":%q,"score":%d`, r.id, r.team, r.score)
	if r.exp != 0 {
		js += fmt.Sprintf(`,"expires_at":%q`, time.Unix(0, r.exp).UTC().Format(time.RFC3339Nano))
	}
	return xe.rec("tt.Session", js+"}")
}

func (xe *expiryEngine) token(r expiring) *anypb.Any {
	return xe.rec("tt.Token", fmt.Sprintf(`{"id":%d,"score":%d,"exp_ms":"%d"}`, r.id, r.score, r.exp/1e6))
}

func (xe *expiryEngine) insert(recs []*anypb.Any) {
	xe.t.Helper()
	if err := xe.write(engine.Batch{Op: engine.OpInsert, Records: recs}); err != nil {
		xe.t.Fatal(err)
	}
}

func (xe *expiryEngine) write(b engine.Batch) error {
	w := xe.e.NewWriter()
	defer w.Close()
	if err := w.Apply(xe.t.Context(), b); err != nil {
		return err
	}
	_, err := w.Sync()
	return err
}

// TestExpiryModel writes records with random expiries, advances the
// engine's clock in random steps (some landing exactly on an expiry), and
// at each instant compares every read with the model: a record whose
// expiry is at or before the clock is returned by no Get, GetRecords,
// Query page, index query, count, aggregate, Scan or Export. Run with
// -expiry.seed=N to replay a failure.
func TestExpiryModel(t *testing.T) {
	seed := *expirySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		t.Logf("seed %d (replay with -expiry.seed=%d)", seed, seed)
		rnd := rand.New(rand.NewPCG(seed, 35))
		models := map[string]map[int64]expiring{"tt.Session": {}, "tt.Token": {}}
		next := int64(1)
		for round := range 8 {
			for typ, model := range models {
				var recs []*anypb.Any
				for range 5 + rnd.IntN(15) {
					r := expiring{id: next, score: int64(rnd.IntN(100)), team: modelTeams[rnd.IntN(len(modelTeams))]}
					next++
					if rnd.IntN(5) > 0 { // the rest never expire
						// Whole milliseconds, so that both types hold them exactly.
						r.exp = xe.now.Load() + int64(rnd.IntN(4000)-500)*1e6
					}
					model[r.id] = r
					if typ == "tt.Session" {
						recs = append(recs, xe.session(r))
					} else {
						recs = append(recs, xe.token(r))
					}
				}
				xe.insert(recs)
			}
			for step := range 6 {
				xe.advance(rnd, models)
				for typ, model := range models {
					xe.compareExpiry(typ, model, fmt.Sprintf("seed %d round %d step %d %s at %v", seed, round, step, typ, xe.clock()))
				}
			}
		}
	})
}

// advance moves the clock forward: to a record's expiry exactly, or by a
// random step.
func (xe *expiryEngine) advance(rnd *rand.Rand, models map[string]map[int64]expiring) {
	now := xe.now.Load()
	if rnd.IntN(2) == 0 {
		for _, model := range models {
			for _, r := range model {
				if r.exp > now {
					xe.now.Store(r.exp)
					return
				}
			}
		}
	}
	xe.now.Store(now + int64(rnd.IntN(800))*1e6)
}

// compareExpiry checks every read of typ with the model at the clock.
func (xe *expiryEngine) compareExpiry(typ string, model map[int64]expiring, at string) {
	t := xe.t
	now := xe.now.Load()
	var want []int64
	var wantScore int64
	wantTeam := map[string][]int64{}
	for id, r := range model {
		if r.exp == 0 || r.exp > now {
			want = append(want, id)
			wantScore += r.score
			if typ == "tt.Session" {
				wantTeam[r.team] = append(wantTeam[r.team], id)
			}
		}
	}
	slices.Sort(want)
	md := xe.e.Schema().Types[protoreflect.FullName(typ)].Desc
	idOf := func(a *anypb.Any) int64 {
		m := dynamicpb.NewMessage(md)
		if err := a.UnmarshalTo(m); err != nil {
			t.Fatal(err)
		}
		return m.Get(md.Fields().ByName("id")).Int()
	}
	check := func(what string, got []int64) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %s = %v, want %v", at, what, got, want)
		}
	}

	var got []int64
	var keys []*structpb.Value
	for id := range model {
		a, err := xe.e.Get(t.Context(), xe.rec(typ, fmt.Sprintf(`{"id":%d}`, id)))
		if err != nil {
			t.Fatal(err)
		}
		if a != nil {
			got = append(got, idOf(a))
		}
		keys = append(keys, structpb.NewStringValue(strconv.FormatInt(id, 10)))
	}
	check("Get", got)

	resp, err := getRecords(xe.e, t.Context(), &pb.GetRequest{Type: typ, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, a := range resp.Records {
		got = append(got, idOf(a))
	}
	check("GetRecords", got)
	if len(resp.Missing) != len(model)-len(want) {
		t.Fatalf("%s: GetRecords missing %d, want %d", at, len(resp.Missing), len(model)-len(want))
	}

	got = nil
	token := ""
	for {
		qr, err := query(xe.e, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: typ}, PageSize: 7, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range qr.Records {
			got = append(got, idOf(a))
		}
		if token = qr.NextPageToken; token == "" {
			break
		}
	}
	check("Query pages", got)

	qr, err := query(xe.e, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: typ, Count: true}})
	if err != nil || qr.Count != uint64(len(want)) {
		t.Fatalf("%s: count = %d, %v; want %d", at, qr.GetCount(), err, len(want))
	}

	agg := &pb.Aggregate{Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT},
		{Op: pb.AggregateOp_AGGREGATE_OP_SUM, Field: "score"}}}
	qr, err = query(xe.e, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: typ, Aggregate: agg}})
	if err != nil || len(qr.Rows) != 1 {
		t.Fatalf("%s: aggregate = %v, %v", at, qr.GetRows(), err)
	}
	sum := fmt.Sprint(wantScore)
	if len(want) == 0 {
		sum = "<nil>" // the sum of no records is null
	}
	if c, s := qr.Rows[0].Values[0].AsInterface(), qr.Rows[0].Values[1].AsInterface(); fmt.Sprint(c) != fmt.Sprint(len(want)) || fmt.Sprint(s) != sum {
		t.Fatalf("%s: count, sum = %v, %v; want %d, %d", at, c, s, len(want), wantScore)
	}

	got = nil
	err = xe.e.Scan(t.Context(), &pb.ScanRequest{Query: &pb.Query{Type: typ}}, func(r *pb.ScanResponse) error {
		for _, a := range r.Records {
			got = append(got, idOf(a))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check("Scan", got)

	got = nil
	err = xe.e.Export(t.Context(), engine.ExportOptions{Types: []string{typ}}, func(c *pb.ExportChunk, h engine.Hold) error {
		h.Release()
		for _, a := range c.GetRecords().GetRecords() {
			got = append(got, idOf(a))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check("Export", got)

	xe.compareSearch(typ, model, check, idOf)
	if typ != "tt.Session" {
		return
	}
	for _, team := range modelTeams {
		qr, err := query(xe.e, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: typ, Filter: fmt.Sprintf("team = %q", team)}})
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for _, a := range qr.Records {
			got = append(got, idOf(a))
		}
		slices.Sort(got)
		w := wantTeam[team]
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Fatalf("%s: team %q (plan %s) = %v, want %v", at, team, qr.GetPlan().GetText(), got, w)
		}
	}
}

// compareSearch checks Search, with responses as messages and as wire
// bytes: a request of a point lookup per record of the model (which the
// engine serves without planning), then one of the whole type, each
// returning the live records.
func (xe *expiryEngine) compareSearch(typ string, model map[int64]expiring, check func(string, []int64), idOf func(*anypb.Any) int64) {
	t := xe.t
	var qs []*pb.Query
	for id := range model {
		qs = append(qs, &pb.Query{Type: typ, Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
			Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: id}}}}}})
	}
	whole := uint64(len(qs))
	for _, wire := range []bool{false, true} {
		reqs := []*pb.SearchRequest{{Queries: qs}, {Queries: []*pb.Query{{Type: typ}}}}
		var points, all []int64
		send := func(r *pb.SearchResponse) error {
			if len(r.Errors) > 0 {
				return fmt.Errorf("search: %v", r.Errors[0])
			}
			for _, b := range r.Results {
				for _, a := range b.Records {
					if b.Query == whole {
						all = append(all, idOf(a))
					} else {
						points = append(points, idOf(a))
					}
				}
			}
			return nil
		}
		var sink engine.SearchSink = sendFunc(send)
		if wire {
			sink = wireSink{sendFunc(send), func(b []byte) error {
				var resp pb.SearchResponse
				if err := proto.Unmarshal(b, &resp); err != nil {
					return err
				}
				return send(&resp)
			}}
		}
		recv := func() (*pb.SearchRequest, error) {
			if len(reqs) == 0 {
				return nil, io.EOF
			}
			r := reqs[0]
			reqs = reqs[1:]
			return r, nil
		}
		if err := xe.e.SearchStream(t.Context(), recvFunc(recv), sink); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("Search lookups (wire %v)", wire), points)
		check(fmt.Sprintf("Search of the type (wire %v)", wire), all)
	}
}

// TestExpiryHostileValues stores integer expiries at the ends of their
// range: a negative one is long past, zero never expires, and the largest
// millisecond count is far future, none overflowing.
func TestExpiryHostileValues(t *testing.T) {
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		cases := []struct {
			ms   int64
			live bool
		}{{0, true}, {-1, false}, {math.MinInt64, false}, {math.MaxInt64, true}, {-999, false}, {1, false},
			{expiryBase.UnixMilli(), false}, {expiryBase.UnixMilli() + 1, true}}
		var recs []*anypb.Any
		for i, c := range cases {
			recs = append(recs, xe.rec("tt.Token", fmt.Sprintf(`{"id":%d,"exp_ms":"%d"}`, i+1, c.ms)))
		}
		recs = append(recs, xe.rec("tt.Session", `{"id":1,"expires_at":"9999-12-31T23:59:59.999999999Z"}`),
			xe.rec("tt.Session", `{"id":2,"expires_at":"0001-01-01T00:00:00Z"}`),
			xe.rec("tt.Session", `{"id":3,"expires_at":"1970-01-01T00:00:00.000000001Z"}`),
			xe.rec("tt.Session", `{"id":4,"expires_at":"1970-01-01T00:00:00Z"}`))
		xe.insert(recs)
		for i, c := range cases {
			a, err := xe.e.Get(t.Context(), xe.rec("tt.Token", fmt.Sprintf(`{"id":%d}`, i+1)))
			if err != nil || (a != nil) != c.live {
				t.Errorf("exp_ms %d: Get = %v, %v; want live %v", c.ms, a, err, c.live)
			}
		}
		for id, live := range map[int]bool{1: true, 2: false, 3: false, 4: true} {
			a, err := xe.e.Get(t.Context(), xe.rec("tt.Session", fmt.Sprintf(`{"id":%d}`, id)))
			if err != nil || (a != nil) != live {
				t.Errorf("session %d: Get = %v, %v; want live %v", id, a, err, live)
			}
		}
	})
}

// TestExpiryWrites: from the instant of its expiry a record conflicts
// with nothing. An insert of its key replaces it (its index entries go),
// a unique value it holds is free, and an update, patch or remove of it is
// NOT_FOUND, as of a record that is not there.
func TestExpiryWrites(t *testing.T) {
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		at := func(d time.Duration) string { return expiryBase.Add(d).Format(time.RFC3339Nano) }
		ms := func(d time.Duration) int64 { return expiryBase.Add(d).UnixMilli() }
		xe.insert([]*anypb.Any{
			xe.rec("tt.Session", fmt.Sprintf(`{"id":1,"team":"red","expires_at":%q}`, at(time.Second))),
			xe.rec("tt.Session", fmt.Sprintf(`{"id":2,"team":"red","expires_at":%q}`, at(2*time.Second))),
			xe.rec("tt.Token", fmt.Sprintf(`{"id":1,"handle":"h","exp_ms":"%d"}`, ms(time.Second))),
		})
		wantCode := func(what string, err error, want apierror.Code) {
			t.Helper()
			if codeOf(err) != want {
				t.Fatalf("%s: %v, want %v", what, err, want)
			}
		}
		// Before the expiry both still conflict.
		wantCode("insert of a live key", xe.write(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{
			xe.rec("tt.Session", `{"id":1,"team":"blue"}`)}}), apierror.AlreadyExists)
		wantCode("insert of a live unique value", xe.write(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{
			xe.rec("tt.Token", `{"id":2,"handle":"h"}`)}}), apierror.AlreadyExists)

		xe.now.Store(expiryBase.Add(time.Second).UnixNano()) // the instant the records of id 1 (a Session and a Token) expire
		if err := xe.write(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{
			xe.rec("tt.Session", `{"id":1,"team":"blue"}`), xe.rec("tt.Token", `{"id":2,"handle":"h"}`)}}); err != nil {
			t.Fatalf("insert over expired records: %v", err)
		}
		teams := func(team string) []int64 {
			qr, err := query(xe.e, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "tt.Session", Filter: fmt.Sprintf("team = %q", team)}})
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, a := range qr.Records {
				m := dynamicpb.NewMessage(xe.e.Schema().Types["tt.Session"].Desc)
				if err := a.UnmarshalTo(m); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, m.Get(m.Descriptor().Fields().ByName("id")).Int())
			}
			return ids
		}
		if red, blue := teams("red"), teams("blue"); !slices.Equal(red, []int64{2}) || !slices.Equal(blue, []int64{1}) {
			t.Fatalf("after the replacing insert: red %v, blue %v; want [2], [1]", red, blue)
		}
		qr, err := query(xe.e, t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: "tt.Token", Filter: `handle = "h"`}})
		if err != nil || len(qr.Records) != 1 || !strings.Contains(qr.Records[0].String(), "h") {
			t.Fatalf("handle h: %v, %v", qr.GetRecords(), err)
		}

		xe.now.Store(expiryBase.Add(2 * time.Second).UnixNano()) // the Session of id 2 expires
		for _, b := range []engine.Batch{
			{Op: engine.OpUpdate, Records: []*anypb.Any{xe.rec("tt.Session", `{"id":2,"team":"blue"}`)}},
			{Op: engine.OpPatch, Records: []*anypb.Any{xe.rec("tt.Session", `{"id":2,"score":1}`)}, Fields: []string{"score"}},
			{Op: engine.OpRemove, Records: []*anypb.Any{xe.rec("tt.Session", `{"id":2}`)}},
		} {
			wantCode(fmt.Sprintf("%v of an expired record", b.Op), xe.write(b), apierror.NotFound)
		}
		// A write condition sees it absent: version 0, and no record for
		// a filter to match.
		zero := uint64(0)
		key2 := xe.rec("tt.Session", `{"id":2}`)
		if err := xe.write(engine.Batch{Op: engine.OpUpsert, Records: []*anypb.Any{xe.rec("tt.Session", `{"id":3}`)},
			Conditions: []*pb.Condition{{Target: &pb.Condition_Key{Key: key2}, Version: &zero}}}); err != nil {
			t.Fatalf("condition of version 0 on an expired record: %v", err)
		}
		wantCode("condition with a filter on an expired record", xe.write(engine.Batch{Op: engine.OpUpsert,
			Records:    []*anypb.Any{xe.rec("tt.Session", `{"id":3}`)},
			Conditions: []*pb.Condition{{Target: &pb.Condition_Key{Key: key2}, Filter: `team = "red"`}}}), apierror.Aborted)
		if err := xe.write(engine.Batch{Op: engine.OpUpsert, Records: []*anypb.Any{xe.rec("tt.Session", `{"id":2,"team":"blue"}`)}}); err != nil {
			t.Fatalf("upsert over an expired record: %v", err)
		}
		if red, blue := teams("red"), teams("blue"); len(red) != 0 || !slices.Equal(blue, []int64{1, 2}) {
			t.Fatalf("after the upsert: red %v, blue %v; want [], [1 2]", red, blue)
		}
		// Token 1, expired, still holds "h" in its bytes; token 2 holds
		// the entry.
		r, err := engine.Check(t.Context(), xe.st)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Fatalf("store inconsistent: %v", r.Problems)
		}
	})
}

// A unique value taken over from an expired record, which a later record
// of the same batch rewrites (an upsert of the expired key, with another
// value, or with none): the entry stays the new holder's, and the value
// stays taken.
func TestExpiryUniqueTakenInBatch(t *testing.T) {
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		for n, second := range []string{`{"id":%d,"handle":"k%d"}`, `{"id":%d,"score":%d}`} {
			old, taker, third := int64(10*n+1), int64(10*n+2), int64(10*n+3)
			h := fmt.Sprintf("h%d", n)
			exp := xe.clock().Add(time.Second).UnixMilli()
			xe.insert([]*anypb.Any{xe.rec("tt.Token", fmt.Sprintf(`{"id":%d,"handle":%q,"exp_ms":"%d"}`, old, h, exp))})
			xe.now.Add(int64(2 * time.Second))
			if err := xe.write(engine.Batch{Op: engine.OpUpsert, Records: []*anypb.Any{
				xe.rec("tt.Token", fmt.Sprintf(`{"id":%d,"handle":%q}`, taker, h)),
				xe.rec("tt.Token", fmt.Sprintf(second, old, n)),
			}}); err != nil {
				t.Fatalf("%s: upsert of a taker and the expired holder: %v", h, err)
			}
			r, err := engine.Check(t.Context(), xe.st)
			if err != nil {
				t.Fatal(err)
			}
			if !r.OK() {
				t.Fatalf("%s: store inconsistent: %v", h, r.Problems)
			}
			err = xe.write(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{
				xe.rec("tt.Token", fmt.Sprintf(`{"id":%d,"handle":%q}`, third, h))}})
			if codeOf(err) != apierror.AlreadyExists {
				t.Fatalf("%s: insert of a third record with the taker's value: %v, want %v", h, err, apierror.AlreadyExists)
			}
		}
	})
}

// TestExpiryIndexBuild: an index built on a type with data skips the
// records expired when it reaches them, so an expired record holding the
// value a live one holds does not fail a unique index's build.
func TestExpiryIndexBuild(t *testing.T) {
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		xe.insert([]*anypb.Any{
			xe.rec("tt.Session", fmt.Sprintf(`{"id":1,"team":"x","expires_at":%q}`, expiryBase.Add(time.Second).Format(time.RFC3339Nano))),
			xe.rec("tt.Session", `{"id":2,"team":"x"}`),
		})
		xe.now.Store(expiryBase.Add(time.Second).UnixNano())
		files := map[string]string{"tt.proto": strings.Replace(expiryProto, `index: { fields: "team" }`,
			`index: { fields: "team" } index: { name: "team_u" fields: "team" unique: true } index: { fields: "score" }`, 1)}
		if _, err := xe.e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: files}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"team_u", "score"} {
			xe.waitBuilt(name)
		}
		r, err := engine.Check(t.Context(), xe.st)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Fatalf("store inconsistent: %v", r.Problems)
		}
	})
}

// waitBuilt waits for the build of index name to end, and fails unless
// the index is READY.
func (xe *expiryEngine) waitBuilt(name string) {
	t := xe.t
	var ix *pb.Index
	for deadline := time.Now().Add(30 * time.Second); ix == nil && time.Now().Before(deadline); {
		gs, err := xe.e.GetSchema(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range gs.Types {
			for _, x := range rt.Indexes {
				if x.Name == name && x.State != pb.IndexState_INDEX_STATE_BUILDING {
					ix = x
				}
			}
		}
		time.Sleep(time.Millisecond) // polling a state, not waiting out a race
	}
	if ix.GetState() != pb.IndexState_INDEX_STATE_READY {
		t.Fatalf("%s: %v", name, ix)
	}
}

// A batch reads the clock once: a record that expires between the check
// of a condition on it (on its key, or on a query's matches) and the
// write of the same record is live to both (here the clock moves on at
// every reading, past the record's expiry).
func TestExpiryOneClockPerBatch(t *testing.T) {
	xe := newExpiryEngine(t, expiryPebble(t))
	var stepping atomic.Bool
	xe.open(engine.Options{Now: func() time.Time {
		now := xe.clock()
		if stepping.Load() {
			xe.now.Add(int64(2 * time.Second))
		}
		return now
	}})
	exp := expiryBase.Add(time.Second).UnixMilli()
	xe.insert([]*anypb.Any{xe.rec("tt.Token", fmt.Sprintf(`{"id":1,"score":5,"exp_ms":"%d"}`, exp))})
	stepping.Store(true)
	err := xe.write(engine.Batch{Op: engine.OpUpdate,
		Records:    []*anypb.Any{xe.rec("tt.Token", `{"id":1,"score":6}`)},
		Conditions: []*pb.Condition{{Target: &pb.Condition_Key{Key: xe.rec("tt.Token", `{"id":1}`)}, Filter: "score = 5"}}})
	if err != nil {
		t.Fatalf("update of a record its condition found live, the clock passing its expiry meanwhile: %v", err)
	}
	// The same with a condition on a query's matches.
	stepping.Store(false)
	exp = xe.clock().Add(time.Second).UnixMilli()
	xe.insert([]*anypb.Any{xe.rec("tt.Token", fmt.Sprintf(`{"id":2,"score":5,"exp_ms":"%d"}`, exp))})
	stepping.Store(true)
	one := uint64(1)
	err = xe.write(engine.Batch{Op: engine.OpUpdate,
		Records:    []*anypb.Any{xe.rec("tt.Token", `{"id":2,"score":6}`)},
		Conditions: []*pb.Condition{{Target: &pb.Condition_Query{Query: &pb.Query{Type: "tt.Token", Filter: "id == 2"}}, Count: &one}}})
	if err != nil {
		t.Fatalf("update of a record its query condition counted, the clock passing its expiry meanwhile: %v", err)
	}
}
