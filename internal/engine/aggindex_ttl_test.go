package engine_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// TestAggregateIndexTTL: on a type with a ttl, aggregations an index
// covers read it and take out the expired records the reaper has not yet
// removed, so that they agree with brute force over the live records at
// every instant of a model clock, before and after the reaper runs, while
// upserts give records new expiries (or revive expired ones); the reaper's
// removals keep the index consistent with the records (the checker).
func TestAggregateIndexTTL(t *testing.T) {
	seed := *aggixSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	files := map[string]string{"ag.proto": strings.Replace(aggixProto, `primary_key: "id"`, `primary_key: "id"
    ttl: { field: "at" }`, 1)}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	run := func(t *testing.T, st store.KV) {
		t.Logf("seed %d (replay with -aggix.seed=%d)", seed, seed)
		var clock atomic.Int64 // seconds after base
		ae := openAggix(t, st, engine.Options{ReapInterval: -1,
			Now: func() time.Time { return base.Add(time.Duration(clock.Load()) * time.Second) }}, files)
		rnd := rand.New(rand.NewPCG(seed, 36))
		model := map[int64]aggRow{}
		expires := map[int64]int64{} // seconds after base; 0: never
		row := func(id int64) aggRow {
			r := randomAggRow(rnd, id)
			r.At, expires[id] = nil, 0
			if rnd.IntN(4) > 0 {
				expires[id] = clock.Load() + 1 + rnd.Int64N(120)
				at := base.Add(time.Duration(expires[id]) * time.Second).Format(time.RFC3339)
				r.At = &at
			}
			model[id] = r
			return r
		}
		var batch []aggRow
		for id := range int64(300) {
			batch = append(batch, row(id))
		}
		ae.write(engine.OpInsert, batch)
		// Explain names the expired records the aggregation took out, if
		// any; it reports whether there were.
		checkPlan := func(round int) bool {
			resp, err := ae.aggregate("", &pb.Aggregate{GroupBy: []string{"team"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}})
			if err != nil {
				t.Fatal(err)
			}
			stale := 0
			for id := range model {
				if x := expires[id]; x != 0 && x <= clock.Load() {
					stale++
				}
			}
			plan := resp.GetPlan().GetText()
			less := fmt.Sprintf(", less %d expired records not yet removed", stale)
			if !strings.HasPrefix(plan, "aggregate index by_team") || (stale > 0) != strings.Contains(plan, less) ||
				(stale == 0 && strings.Contains(plan, "expired")) {
				t.Fatalf("seed %d round %d: plan %q, want %d expired records taken out", seed, round, plan, stale)
			}
			return stale > 0
		}
		checkPlan(-1) // nothing has expired yet
		expiredSeen := false
		for round := range 10 {
			clock.Add(15)
			var up []aggRow
			for id := range int64(300) {
				if rnd.IntN(10) == 0 {
					up = append(up, row(id))
				}
			}
			ae.write(engine.OpUpsert, up)
			var live []aggRow
			for id, r := range model {
				if x := expires[id]; x == 0 || x > clock.Load() {
					live = append(live, r)
				}
			}
			ae.compareIndexed(rnd, live, seed, round)
			expiredSeen = checkPlan(round) || expiredSeen
			if round%3 == 2 {
				if _, err := ae.e.Reap(t.Context()); err != nil {
					t.Fatal(err)
				}
				for id := range model {
					if x := expires[id]; x != 0 && x <= clock.Load() {
						delete(model, id)
					}
				}
				mustCheck(t, st, fmt.Sprintf("seed %d round %d, reaped", seed, round))
			}
		}
		if !expiredSeen {
			t.Errorf("seed %d: no aggregation took out an expired record", seed)
		}
	}
	t.Run("pebble", func(t *testing.T) {
		st := pebbleStore(t)
		run(t, st)
	})
	t.Run("etcd", func(t *testing.T) {
		st, err := etcd.Open(etcd.Options{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/agt/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		run(t, st)
	})
}

// A group whose records have all expired, not yet reaped, is no group:
// it neither answers nor counts against the group limit (here 2, with
// two live groups and one of expired records only).
func TestAggregateIndexTTLGroupLimit(t *testing.T) {
	files := map[string]string{"ag.proto": strings.Replace(aggixProto, `primary_key: "id"`, `primary_key: "id"
    ttl: { field: "at" }`, 1)}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64 // seconds after base
	ae := openAggix(t, expiryPebble(t), engine.Options{ReapInterval: -1, MaxAggregateGroups: 2,
		Now: func() time.Time { return base.Add(time.Duration(clock.Load()) * time.Second) }}, files)
	at := base.Add(10 * time.Second).Format(time.RFC3339)
	ae.write(engine.OpInsert, []aggRow{{ID: 1, Team: "a"}, {ID: 2, Team: "b"}, {ID: 3, Team: "b"},
		{ID: 4, Team: "c", At: &at}, {ID: 5, Team: "c", At: &at}})
	clock.Store(20)
	count := &pb.Aggregate{GroupBy: []string{"team"}, Functions: []*pb.AggregateFunction{{Op: pb.AggregateOp_AGGREGATE_OP_COUNT}}}
	resp, err := ae.aggregate("", count)
	if err != nil {
		t.Fatalf("two live groups, limit 2: %v", err)
	}
	var got []string
	for _, r := range resp.Rows {
		got = append(got, fmt.Sprintf("%s=%v", r.Group[0].GetStringValue(), r.Values[0].GetNumberValue()))
	}
	if strings.Join(got, " ") != "a=1 b=2" || !strings.Contains(resp.GetPlan().GetText(), "less 2 expired") {
		t.Fatalf("groups %v, plan %q; want a=1 b=2, less 2 expired", got, resp.GetPlan().GetText())
	}
}
