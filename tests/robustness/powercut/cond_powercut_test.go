package powercut_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// TestPowerCutConditional cuts the power under a server while writers
// increment counters by conditional updates and patches, at a random
// acknowledgement of each round (every other round keeping a random part
// of what was not synced), and checks the next server's change log and
// counters (harness.Counters.Verify): every batch acknowledged before the
// cut is there at its position, every commit is one whole batch whose
// conditions held, no batch refused by a condition or lost at an earlier
// cut is there, and each counter's value and version are what the log
// makes them.
func TestPowerCutConditional(t *testing.T) {
	harness.RunSeeds(t, []uint64{1}, runPowerCutConditional)
}

func runPowerCutConditional(t *testing.T, seed uint64) {
	rounds := *powercutRounds
	if testing.Short() || harness.RaceEnabled {
		rounds = min(rounds, 6)
	}
	rng := rand.New(rand.NewPCG(seed, 14))
	m := harness.NewCounters()
	fs := pebble.NewMemFS()
	for round := range rounds {
		fs = powercutConditionalRound(t, rng, m, fs, round, seed)
	}
	ts := powercutStart(t, fs)
	stats := m.Verify(t, ts, "at the end")
	ts.Stop()
	if stats.Acked <= rounds || stats.Aborted == 0 {
		t.Fatalf("%v: the writers should have had batches acknowledged and refused", stats)
	}
	t.Logf("%d power cuts: %v", rounds, stats)
}

// powercutConditionalRound starts a server on fs, checks what the last
// cut left, lets three writers increment counters until a random
// acknowledgement, and returns what a power cut then leaves.
func powercutConditionalRound(t *testing.T, rng *rand.Rand, m *harness.Counters, fs *pebble.MemFS, round int, seed uint64) *pebble.MemFS {
	t.Helper()
	when := fmt.Sprintf("round %d", round)
	ts := powercutStart(t, fs)
	if round == 0 {
		ts.MustApply(map[string]string{harness.CountersFile: harness.CountersSchema})
		if err := m.Setup(t.Context(), ts.C); err != nil {
			t.Fatal(err)
		}
	} else {
		m.Verify(t, ts, when)
	}
	acks := newAckCounter()
	m.OnAck = acks.add
	m.SetPromise(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := range 3 {
		wrng := rand.New(rand.NewPCG(seed, uint64(100*round+w)))
		wg.Add(1)
		go func() { defer wg.Done(); m.Write(ctx, ts.C, wrng) }()
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-acks.reached(1 + rng.IntN(60)):
	case <-stopped:
		m.Errors(t)
		t.Fatalf("%s: the writers stopped before the moment of the cut", when)
	case <-time.After(time.Minute):
		t.Fatalf("%s: the moment of the cut never came", when)
	}
	m.SetPromise(false)
	keep := 0
	if round%2 == 1 {
		keep = 50
	}
	cut := fs.PowerCut(rng, keep)
	cancel()
	wg.Wait()
	ts.Stop()
	m.Errors(t)
	mustCheckMemFS(t, cut, when+", after the power cut")
	return cut
}
