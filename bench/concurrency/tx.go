package concurrency

import (
	"context"

	"github.com/protobase/protobase/bench"
)

// txRows is how many rows the transactions pick their two from.
const txRows = 10000

// transactions are the transaction workloads (none yet).
func (g *Experiment) transactions(ctx context.Context, t *bench.Target) []named {
	return nil
}
