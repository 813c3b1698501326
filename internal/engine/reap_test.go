package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
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
		revived := 0
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
				revived++
			}
		})
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
			revived = 0
			n, err := xe.e.Reap(t.Context())
			if err != nil {
				t.Fatalf("%s: reap: %v", at, err)
			}
			if n != want-revived {
				t.Fatalf("%s: reaped %d records, want %d (%d expired, %d written again while reaping)", at, n, want-revived, want, revived)
			}
			for _, model := range models {
				for id, r := range model {
					if r.exp != 0 && r.exp <= now {
						delete(model, id)
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
