package engine_test

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// TestAggregateSplitEtcd: on etcd, where a type is split into parts only
// past a few thousand keys, an aggregate over enough records reads parts
// in parallel and their merged groups agree with brute force.
func TestAggregateSplitEtcd(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one CPU: aggregates read one part")
	}
	seed := *aggSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -agg.seed=%d)", seed, seed)
	st, err := etcd.Open(etcd.Options{Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/ags/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ae := openAgg(t, st, engine.Options{})
	rnd := rand.New(rand.NewPCG(seed, 35))
	rows := make([]aggRow, 0, 6000)
	for from := int64(0); from < 6000; from += 500 {
		batch := make([]aggRow, 0, 500)
		for id := from; id < from+500; id++ {
			batch = append(batch, randomAggRow(rnd, id))
		}
		ae.write(engine.OpInsert, batch)
		rows = append(rows, batch...)
	}
	for range 20 {
		ae.compareRandom(rnd, rows, seed, 0)
	}
	if ae.parallel < 2 {
		t.Errorf("no aggregate read parts in parallel on etcd (at most %d)", ae.parallel)
	}
}
