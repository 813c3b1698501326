package engine_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/schema"
)

// TestReapModel writes records with random expiries, updates live ones
// (moving their expiries later, earlier, or off), advances the engine's
// clock and reaps. While each reaper batch is on its way, the test writes
// again some of the records the batch found expired, with a later expiry
// or none, as a client racing the reaper: the reaper must not delete
// them. After each pass the reaper has deleted exactly the records expired
// in the model, the store holds no key of them (records, expiry and other
// index entries, counted), every kept record reads back, and the checker
// finds the indexes consistent. Run with -expiry.seed=N to replay.
func TestReapModel(t *testing.T) {
	seed := *expirySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		t.Logf("seed %d (replay with -expiry.seed=%d)", seed, seed)
		rnd := rand.New(rand.NewPCG(seed, 34))
		models := map[string]map[int64]expiring{"tt.Session": {}, "tt.Token": {}}
		revived := map[string]bool{} // of the pass, by type and id
		engine.SetReapHook(t, func(recs []*anypb.Any) {
			for _, a := range recs {
				if rnd.IntN(3) > 0 {
					continue
				}
				typ := typeOfAny(a)
				r := models[typ][xe.idOf(a)]
				r.exp = 0
				if rnd.IntN(4) > 0 {
					r.exp = xe.now.Load() + int64(1+rnd.IntN(3000))*1e6
				}
				models[typ][r.id] = r
				if err := xe.write(engine.Batch{Op: engine.OpUpsert, Records: []*anypb.Any{xe.any(typ, r)}}); err != nil {
					t.Errorf("upsert racing the reaper: %v", err)
				}
				revived[fmt.Sprint(typ, r.id)] = true
			}
		})
		logged := uint64(0) // the change log is read up to here
		next := int64(1)
		for round := range 10 {
			at := fmt.Sprintf("seed %d round %d", seed, round)
			for typ, model := range models {
				var recs []*anypb.Any
				for range 10 + rnd.IntN(30) {
					r := expiring{id: next, score: int64(rnd.IntN(100)), team: modelTeams[rnd.IntN(len(modelTeams))]}
					next++
					if rnd.IntN(5) > 0 {
						r.exp = xe.now.Load() + int64(rnd.IntN(4000)-500)*1e6
					}
					model[r.id] = r
					recs = append(recs, xe.any(typ, r))
				}
				xe.insert(recs)
				xe.updateLive(rnd, typ, model)
			}
			xe.advance(rnd, models)
			now := xe.now.Load()
			want := 0
			for _, model := range models {
				for _, r := range model {
					if r.exp != 0 && r.exp <= now {
						want++
					}
				}
			}
			clear(revived)
			if clog := xe.e.ChangeLog(); clog.On() {
				xe.expiredInLog(logged, clog.Durable().Value()) // the writes before the pass
				logged = clog.Durable().Value()
			}
			n, err := xe.e.Reap(t.Context())
			if err != nil {
				t.Fatalf("%s: reap: %v", at, err)
			}
			if n != want-len(revived) {
				t.Fatalf("%s: reaped %d records, want %d (%d expired, %d written again while reaping)", at, n, want-len(revived), want, len(revived))
			}
			gone := map[string]bool{}
			for typ, model := range models {
				for id, r := range model {
					if r.exp != 0 && r.exp <= now {
						delete(model, id)
						gone[fmt.Sprint(typ, id)] = true
					}
				}
			}
			// Watch's source, the change log (Pebble), holds one removal
			// marked as an expiry per record reaped, one per record written
			// again while the reaper was at it (that write deletes the
			// expired record first), and none of another.
			if clog := xe.e.ChangeLog(); clog.On() {
				expired := xe.expiredInLog(logged, clog.Durable().Value())
				logged = clog.Durable().Value()
				if len(expired) != n+len(revived) {
					t.Fatalf("%s: the change log holds %d expiries, want %d", at, len(expired), n+len(revived))
				}
				for _, k := range expired {
					if !gone[k] && !revived[k] {
						t.Fatalf("%s: the change log holds an expiry of %s, which the model keeps", at, k)
					}
				}
			}
			xe.compareDisk(models, at)
		}
	})
}

// updateLive updates a few live records of typ: a later expiry, an
// earlier one (maybe already passed), or none.
func (xe *expiryEngine) updateLive(rnd *rand.Rand, typ string, model map[int64]expiring) {
	now := xe.now.Load()
	var recs []*anypb.Any
	for id, r := range model {
		if (r.exp != 0 && r.exp <= now) || rnd.IntN(4) > 0 {
			continue
		}
		switch rnd.IntN(3) {
		case 0:
			r.exp = 0
		case 1:
			r.exp = now + int64(1+rnd.IntN(5000))*1e6
		default:
			r.exp = now + int64(rnd.IntN(1000)-300)*1e6
		}
		model[id] = r
		recs = append(recs, xe.any(typ, r))
	}
	if len(recs) > 0 {
		if err := xe.write(engine.Batch{Op: engine.OpUpdate, Records: recs}); err != nil {
			xe.t.Fatalf("update %s: %v", typ, err)
		}
	}
}

// compareDisk checks the store against the model: one record key, one
// expiry entry and one entry of each other non-unique index per model
// record, every model record readable, and the checker content.
func (xe *expiryEngine) compareDisk(models map[string]map[int64]expiring, at string) {
	t := xe.t
	for typ, model := range models {
		rt := xe.e.Schema().Types[protoreflect.FullName(typ)]
		if n := xe.countKeys(keyspace.RecordPrefix(rt.ID)); n != len(model) {
			t.Fatalf("%s: %s: %d record keys stored, want %d", at, typ, n, len(model))
		}
		for _, ix := range rt.Indexes {
			if ix.Unique {
				continue // the test's tokens hold no handle: no entries
			}
			if n := xe.countKeys(keyspace.IndexPrefix(ix.ID)); n != len(model) {
				t.Fatalf("%s: %s: index %s holds %d entries, want %d", at, typ, ix.Name, n, len(model))
			}
		}
		for _, r := range model {
			a, err := xe.e.Get(t.Context(), xe.any(typ, expiring{id: r.id}))
			if err != nil || a == nil {
				t.Fatalf("%s: %s %d (expiry %v) is gone: %v", at, typ, r.id, r.exp, err)
			}
		}
	}
	rep, err := engine.Check(t.Context(), xe.st)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%s: store inconsistent: %v", at, rep.Problems)
	}
}

func (xe *expiryEngine) countKeys(prefix []byte) int {
	it, err := xe.st.NewIterator(prefix, keyspace.PrefixEnd(prefix))
	if err != nil {
		xe.t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Error(); err != nil {
		xe.t.Fatal(err)
	}
	return n
}

func (xe *expiryEngine) any(typ string, r expiring) *anypb.Any {
	if typ == "tt.Session" {
		return xe.session(r)
	}
	return xe.token(r)
}

func (xe *expiryEngine) idOf(a *anypb.Any) int64 {
	m := dynamicpb.NewMessage(xe.e.Schema().Types[protoreflect.FullName(typeOfAny(a))].Desc)
	if err := a.UnmarshalTo(m); err != nil {
		xe.t.Fatal(err)
	}
	return m.Get(m.Descriptor().Fields().ByName("id")).Int()
}

func typeOfAny(a *anypb.Any) string { return string(a.MessageName()) }

// TestReapBounded: a great many records expiring at the same instant are
// reaped in batches of at most engine.DefaultReapBatch records, and
// another client's writes go through between the batches and while the
// pass runs.
func TestReapBounded(t *testing.T) {
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		const n = 4500
		exp := xe.now.Load() + int64(time.Second)
		for start := int64(1); start <= n; start += 1000 {
			var recs []*anypb.Any
			for id := start; id < start+1000 && id <= n; id++ {
				recs = append(recs, xe.session(expiring{id: id, team: "red", exp: exp}))
			}
			xe.insert(recs)
		}
		xe.now.Store(exp)
		batches, most, between := 0, 0, int64(n)
		engine.SetReapHook(t, func(recs []*anypb.Any) {
			batches++
			most = max(most, len(recs))
			// Another client writes between two batches of the pass.
			between++
			xe.insert([]*anypb.Any{xe.token(expiring{id: between})})
		})
		// And another writes all along the pass.
		done := make(chan struct{})
		written := make(chan int)
		go func() {
			w, id := 0, int64(1e6)
			defer func() { written <- w }()
			for {
				select {
				case <-done:
					return
				default:
				}
				id++
				if err := xe.write(engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{xe.session(expiring{id: id, team: "blue"})}}); err != nil {
					t.Errorf("write during the reap: %v", err)
					return
				}
				w++
			}
		}()
		got, err := xe.e.Reap(t.Context())
		close(done)
		w := <-written
		if err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Fatalf("reaped %d records, want %d", got, n)
		}
		if most > engine.DefaultReapBatch || batches < n/engine.DefaultReapBatch {
			t.Fatalf("%d batches of at most %d records for %d records; want batches of at most %d", batches, most, n, engine.DefaultReapBatch)
		}
		rt := xe.e.Schema().Types["tt.Session"]
		if keys := xe.countKeys(keyspace.RecordPrefix(rt.ID)); keys != w {
			t.Fatalf("%d session keys stored after the reap, want the %d written during it", keys, w)
		}
		t.Logf("%d records reaped in %d batches of at most %d; %d writes by another client during the pass", got, batches, most, w)
	})
}

// TestReapTTLPlanned: a ttl option added to a type holding records is
// planned like an index build (the dry run and the change say so), reads
// are exact at once, and the reaper leaves the type alone until its
// expiry index is built; another ttl field rebuilds the index, another
// unit keeps it, and removing the option drops it, without allow_drop.
func TestReapTTLPlanned(t *testing.T) {
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		withTTL := expiryProto
		noTTL := strings.Replace(withTTL, "    ttl: { field: \"expires_at\" }\n", "", 1)
		apply := func(src string, dry bool) *pb.ApplySchemaResponse {
			t.Helper()
			resp, err := xe.e.ApplySchema(t.Context(), &pb.ApplySchemaRequest{Files: map[string]string{"tt.proto": src}, DryRun: dry})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		changes := func(resp *pb.ApplySchemaResponse) string {
			var out []string
			for _, tc := range resp.GetPlan().GetTypesChanged() {
				out = append(out, tc.Type+": "+strings.Join(tc.Changes, "; "))
			}
			return strings.Join(out, "\n")
		}
		apply(noTTL, false)
		past := expiryBase.Add(-time.Second).UnixNano()
		xe.insert([]*anypb.Any{
			xe.session(expiring{id: 1, exp: past}), xe.session(expiring{id: 2, exp: past}),
			xe.session(expiring{id: 3, exp: expiryBase.Add(time.Hour).UnixNano()}),
			xe.session(expiring{id: 4}), xe.session(expiring{id: 5}),
		})
		rt := func() *schema.RecordType { return xe.e.Schema().Types["tt.Session"] }
		records := func() int { return xe.countKeys(keyspace.RecordPrefix(rt().ID)) }
		// waitBuilt waits for the session expiry index's build to end
		// (tt.Token has an index of that name too).
		waitBuilt := func() {
			t.Helper()
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
				ix, _ := rt().Index(schema.ExpiryIndexName)
				if ix.State == pb.IndexState_INDEX_STATE_READY {
					return
				}
				if ix.State == pb.IndexState_INDEX_STATE_FAILED || time.Now().After(deadline) {
					t.Fatalf("expiry index of tt.Session: %v %s", ix.State, ix.Error)
				}
			}
		}

		dry := apply(withTTL, true)
		added := dry.GetPlan().GetIndexesAdded()
		if dry.Applied || len(added) != 1 || added[0].Type != "tt.Session" || added[0].Index != schema.ExpiryIndexName || !added[0].BuildRequired {
			t.Fatalf("dry run of a ttl on a type with records: applied %v, indexes added %v", dry.Applied, added)
		}
		if c := changes(dry); !strings.Contains(c, "ttl added on field expires_at: expiry index (ttl) added") {
			t.Fatalf("dry run changes: %s", c)
		}

		// Builds wait for the gate while the test holds it.
		var gate sync.Mutex
		engine.SetBuildHook(t, func() {
			gate.Lock()
			defer gate.Unlock() // held only to wait for the test's turn
		})
		gate.Lock()
		held := true
		defer func() {
			if held {
				gate.Unlock()
			}
		}()
		apply(withTTL, false)
		if n := xe.count("tt.Session"); n != 3 {
			t.Fatalf("%d sessions read while the expiry index is built, want 3", n)
		}
		if n, err := xe.e.Reap(t.Context()); err != nil || n != 0 {
			t.Fatalf("reap while the expiry index is built: %d, %v; want 0", n, err)
		}
		if n := records(); n != 5 {
			t.Fatalf("%d session keys stored while the expiry index is built, want 5", n)
		}
		gate.Unlock()
		held = false
		waitBuilt()
		if n, err := xe.e.Reap(t.Context()); err != nil || n != 2 {
			t.Fatalf("reap once the expiry index is built: %d, %v; want 2", n, err)
		}
		if n := records(); n != 3 {
			t.Fatalf("%d session keys stored after the reap, want 3", n)
		}

		moved := strings.Replace(strings.Replace(withTTL, `ttl: { field: "expires_at" }`, `ttl: { field: "ends_at" }`, 1),
			"  int64 score = 4;\n}", "  int64 score = 4;\n  google.protobuf.Timestamp ends_at = 5;\n}", 1)
		if c := changes(apply(moved, false)); !strings.Contains(c, "ttl field changed to ends_at: expiry index (ttl) rebuilt") {
			t.Fatalf("ttl moved to another field: %s", c)
		}
		waitBuilt()
		seconds := strings.Replace(moved, "unit: TTL_UNIT_MILLISECONDS", "unit: TTL_UNIT_SECONDS", 1)
		if c := changes(apply(seconds, false)); !strings.Contains(c, "tt.Token: ttl unit changed from TTL_UNIT_MILLISECONDS to TTL_UNIT_SECONDS") {
			t.Fatalf("ttl unit changed: %s", c)
		}
		old, _ := rt().Index(schema.ExpiryIndexName)
		gone := strings.Replace(seconds, "    ttl: { field: \"ends_at\" }\n", "", 1)
		resp := apply(gone, false)
		if c := changes(resp); !strings.Contains(c, "ttl removed: expiry index (ttl) dropped") {
			t.Fatalf("ttl removed: %s", c)
		}
		if n := xe.countKeys(keyspace.IndexPrefix(old.ID)); n != 0 {
			t.Fatalf("%d entries of the dropped expiry index left", n)
		}
		rep, err := engine.Check(t.Context(), xe.st)
		if err != nil || !rep.OK() {
			t.Fatalf("check: %v, %v", rep, err)
		}
	})
}

// count counts the records of typ a query returns.
func (xe *expiryEngine) count(typ string) int {
	qr, err := query(xe.e, xe.t.Context(), &pb.QueryRequest{Query: &pb.Query{Type: typ}})
	if err != nil {
		xe.t.Fatal(err)
	}
	return len(qr.Records)
}

// expiredInLog returns the records ("type id") whose removal the change
// log records as an expiry in commits from+1..to. Every other change must
// be an insert, update or client's remove.
func (xe *expiryEngine) expiredInLog(from, to uint64) []string {
	t := xe.t
	if to <= from {
		return nil
	}
	r := xe.e.ChangeLog().NewReader(nil)
	defer r.Close()
	r.Round(from+1, to)
	var out []string
	for r.More() {
		_, ent, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ent == nil {
			break
		}
		var ch changelog.Change
		for {
			ok, err := ent.Next(&ch)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if ch.Op != changelog.Expire {
				continue
			}
			rt := xe.e.Schema().ByID[ch.TypeID]
			a := &anypb.Any{TypeUrl: "type.googleapis.com/" + string(rt.Name), Value: bytes.Clone(ch.Old)}
			out = append(out, fmt.Sprint(string(rt.Name), xe.idOf(a)))
		}
		if err := r.Done(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A reaper batch whose records were all written again while it was on its
// way (their expiries moved later) deletes nothing and commits nothing:
// the change log takes the racing writes alone (each an expiry of the
// record it replaces, then the write), no entry of no records, which a
// replay could not apply.
func TestReapNothingLeft(t *testing.T) {
	expiryStores(t, func(t *testing.T, xe *expiryEngine) {
		r := expiring{id: 1, exp: xe.now.Load() + int64(time.Second)}
		xe.insert([]*anypb.Any{xe.any("tt.Token", r)})
		xe.now.Add(int64(2 * time.Second))
		writes := 0
		engine.SetReapHook(t, func(recs []*anypb.Any) {
			for range recs {
				r.exp = xe.now.Load() + int64(time.Hour)
				if err := xe.write(engine.Batch{Op: engine.OpUpsert, Records: []*anypb.Any{xe.any("tt.Token", r)}}); err != nil {
					t.Errorf("upsert racing the reaper: %v", err)
				}
				writes++
			}
		})
		clog := xe.e.ChangeLog()
		before := clog.Durable().Value()
		n, err := xe.e.Reap(t.Context())
		if err != nil || n != 0 || writes != 1 {
			t.Fatalf("reap of a record written again meanwhile: %d reaped, %v (%d racing writes)", n, err, writes)
		}
		if clog.On() {
			if got := clog.Durable().Value() - before; got != 2*uint64(writes) {
				t.Fatalf("the change log took %d entries for %d racing writes (two each) and a reaper batch that deleted nothing", got, writes)
			}
		}
	})
}

// Expired records larger in all than the in-flight limit allows one batch
// are reaped in batches within it, and a type that fails to reap keeps no
// other type's records: here every record of both types is reaped.
func TestReapLargeRecords(t *testing.T) {
	xe := newExpiryEngine(t, expiryPebble(t)).open(engine.Options{MaxInflightBytes: 64 << 10})
	const n = 400
	team := strings.Repeat("t", 1000)
	for id := int64(1); id <= n; {
		var recs []*anypb.Any
		for ; id <= n && len(recs) < 40; id++ {
			recs = append(recs, xe.session(expiring{id: id, team: team, exp: xe.now.Load() + int64(time.Second)}),
				xe.token(expiring{id: id, exp: xe.now.Load() + int64(time.Second)}))
		}
		xe.insert(recs)
	}
	xe.now.Add(int64(2 * time.Second))
	got, err := xe.e.Reap(t.Context())
	if err != nil || got != 2*n {
		t.Fatalf("reap of %d records of 1 KiB and %d small ones, 64 KiB in flight: %d reaped, %v", n, n, got, err)
	}
}

// A batch that replaces expired records takes their keys alone into the
// batch that deletes them first: with the write budget barely above the
// batch, the write still goes through (a deleting batch that held the
// records' bytes again would wait for budget the batch itself holds, and
// be refused).
func TestReapReplacedWithinBudget(t *testing.T) {
	xe := newExpiryEngine(t, expiryPebble(t)).open(engine.Options{MaxInflightBytes: 64 << 10, WatchRetention: time.Hour})
	team := strings.Repeat("t", 5000)
	batch := func(exp int64) []*anypb.Any {
		var recs []*anypb.Any
		for id := int64(1); id <= 10; id++ {
			recs = append(recs, xe.session(expiring{id: id, team: team, exp: exp}))
		}
		return recs
	}
	xe.insert(batch(xe.now.Load() + int64(time.Second)))
	xe.now.Add(int64(2 * time.Second))
	xe.insert(batch(0))
	if n := xe.e.Stats().Expired("tt.Session"); n != 10 {
		t.Fatalf("%d expired records deleted before the insert, want 10", n)
	}
}
