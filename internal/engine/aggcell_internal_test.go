package engine

import (
	"encoding/binary"
	"flag"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

var aggCellSeed = flag.Uint64("aggcell.seed", 0, "seed of TestAggCellFloatSum (0: from the clock)")

// TestAggCellFloatSum: a float cell's sum, as records of random
// magnitudes (1e-5 to 1e20) are added and removed, stays within a few
// units in the last place of the exact sum of the values left (big.Float),
// however large the values added and removed meanwhile; a plain float64
// sum loses the small values under the large ones.
func TestAggCellFloatSum(t *testing.T) {
	seed := *aggCellSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rnd := rand.New(rand.NewPCG(seed, 1))
	f := &aggField{cls: vFloat}
	for round := range 200 {
		var c aggCell
		var live []float64
		exact := new(big.Float).SetPrec(4096)
		spread := 0.0 // the sum of the magnitudes ever added: what the rounding scales with
		for step := range 200 {
			if len(live) > 0 && rnd.IntN(3) == 0 {
				i := rnd.IntN(len(live))
				x := live[i]
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				c.take(f, aggVal{ok: true, f: x}, -1)
				exact.Sub(exact, big.NewFloat(x))
				continue
			}
			x := math.Pow(10, float64(rnd.IntN(26)-5)) * (rnd.Float64() + 0.5)
			if rnd.IntN(2) == 0 {
				x = -x
			}
			live = append(live, x)
			spread += math.Abs(x)
			c.take(f, aggVal{ok: true, f: x}, 1)
			exact.Add(exact, big.NewFloat(x))
			want, _ := exact.Float64()
			// Neumaier's bound: twice the unit roundoff of the sum, and a
			// term in the square of the unit roundoff of every magnitude.
			bound := 4*ulp(want) + float64(step+1)*spread*0x1p-104
			if got := c.float(); math.Abs(got-want) > bound {
				t.Fatalf("seed %d (replay with -aggcell.seed=%d) round %d step %d: sum %g, exact %g (bound %g)",
					seed, seed, round, step, got, want, bound)
			}
		}
	}
}

func ulp(x float64) float64 {
	x = math.Abs(x)
	return math.Nextafter(x, math.Inf(1)) - x
}

// A float cell written without its compensation (40 bytes) reads back
// with none; the compensated cell (48 bytes) round-trips; any other length
// is refused.
func TestAggCellLayouts(t *testing.T) {
	a := &aggIndex{sums: []*aggField{{cls: vInt}, {cls: vFloat}}}
	e := &aggEntry{count: 3, cells: []aggCell{{n: 3, hi: -1, lo: 7}, {n: 2, f: 1e20, comp: 4, pinf: 1}}}
	enc := a.encode(nil, e)
	var got aggEntry
	if err := a.decode(enc, &got); err != nil || got.count != 3 || got.cells[0] != e.cells[0] || got.cells[1] != e.cells[1] {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, *e)
	}
	old := enc[:len(enc)-8] // the float cell is the last: its compensation is the entry's last word
	if err := a.decode(old, &got); err != nil || got.cells[1].comp != 0 || got.cells[1].f != 1e20 || got.cells[1].pinf != 1 {
		t.Fatalf("cell without its compensation: %+v, %v", got, err)
	}
	for _, n := range []int{len(enc) - 16, len(enc) + 8, len(enc) - 1} {
		b := append(binary.BigEndian.AppendUint64(nil, 0), make([]byte, n-8)...)
		if err := a.decode(b, &got); err == nil {
			t.Errorf("an entry of %d bytes decoded", n)
		}
	}
}
