package engine

import (
	"flag"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

var heldSumSeed = flag.Uint64("heldsum.seed", 0, "seed of TestHeldSum (0: from the clock)")

// Holds added to a HeldSum by many goroutines and each returned once,
// while the sum ends at a random moment: every byte goes back to the result
// budget exactly once (a byte given back twice panics the budget), Holds
// added after the end are given back at once, and Returns after the end
// give back nothing more. -heldsum.seed=N replays a run.
func TestHeldSum(t *testing.T) {
	e := openEngine(t)
	total := e.opts.MaxResultBufferBytes
	seed := *heldSumSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	for round := range 20 {
		rnd := rand.New(rand.NewPCG(seed, uint64(round)))
		var s HeldSum
		const workers, each = 4, 200
		endAt := rnd.IntN(workers * each)
		// mu orders the Adds, so that s ends after exactly endAt of them;
		// Returns race with them and with the end.
		var mu sync.Mutex
		added := 0
		refused := 0
		var wg sync.WaitGroup
		for w := range workers {
			wr := rand.New(rand.NewPCG(seed, uint64(round*workers+w+1)))
			wg.Go(func() {
				var kept []Hold
				for range each {
					n := 1 + wr.Int64N(64<<10)
					if !e.results.TryAcquire(n) {
						t.Errorf("seed %d: %d bytes not in the budget", seed, n)
						return
					}
					h := Hold{e: e, n: n}
					mu.Lock()
					ok := s.Add(h)
					added++
					if !ok {
						refused++
					}
					if added == endAt {
						s.End()
					}
					mu.Unlock()
					if ok {
						kept = append(kept, h)
					}
					if len(kept) > 0 && wr.IntN(2) == 0 {
						i := wr.IntN(len(kept))
						s.Return(kept[i])
						kept = append(kept[:i], kept[i+1:]...)
					}
				}
				for _, h := range kept {
					s.Return(h)
				}
			})
		}
		wg.Wait()
		if endAt == 0 {
			s.End() // the sum ends after everything was returned
		}
		if !e.results.TryAcquire(total) {
			t.Fatalf("seed %d round %d: the budget is not whole after the end", seed, round)
		}
		e.results.Release(total)
		if endAt > 0 && refused != workers*each-endAt {
			t.Fatalf("seed %d round %d: %d Holds given back at their Add, want the %d added after the end",
				seed, round, refused, workers*each-endAt)
		}
		s.Return(Hold{e: e, n: 1}) // ended: nothing given back, nothing panics
	}
	if t.Failed() {
		t.Logf("seed %d (replay with -heldsum.seed=%d)", seed, seed)
	}
}
