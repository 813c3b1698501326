package crash_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// TestCrashConditional kills a server process with SIGKILL while writers
// increment counters by conditional updates and patches, several times,
// and after each kill checks the change log and the counters on a
// restarted server (harness.Counters.Verify): every acknowledged batch is
// there at its position, every commit is one whole batch whose conditions
// held, no batch refused by a condition is there, and each counter's value
// and version are what the log makes them.
func TestCrashConditional(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test starts child processes")
	}
	for _, b := range harness.Backends {
		t.Run(b.Name, func(t *testing.T) {
			harness.RunSeeds(t, []uint64{1}, func(t *testing.T, seed uint64) { runCrashConditional(t, b, seed) })
		})
	}
}

func runCrashConditional(t *testing.T, b harness.Backend, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	cfg := b.Config(t)
	m := harness.NewCounters()
	const writers, kills = 3, 4
	var stats harness.Stats
	for round := range kills {
		cmd, addr := servertest.StartWith(t, cfg)
		c, err := client.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := c.ApplySchema(t.Context(), map[string]string{harness.CountersFile: harness.CountersSchema}, client.SchemaOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := m.Setup(t.Context(), c); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range writers {
			wrng := rand.New(rand.NewPCG(seed, uint64(100*round+w)))
			wg.Add(1)
			go func() { defer wg.Done(); m.Write(ctx, c, wrng) }()
		}
		time.Sleep(time.Duration(150+rng.IntN(400)) * time.Millisecond) // a random moment to crash, not a synchronisation
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		cancel()
		wg.Wait()
		c.Close()
		m.Errors(t)
		when := fmt.Sprintf("after kill %d", round+1)
		b.MustCheck(t, cfg, when)
		ts := servertest.New(t, cfg)
		stats = m.Verify(t, ts, when)
		ts.Stop()
	}
	if stats.Acked <= kills || stats.Aborted == 0 {
		t.Fatalf("%v: the writers should have had batches acknowledged and refused", stats)
	}
	t.Logf("%d kills: %v", kills, stats)
}
