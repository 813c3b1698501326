package concurrency

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
)

// transactions are the transaction workloads on u's rows: g.Clients
// clients each running transactions that read two random rows and write
// both back, and the same clients sending the two writes alone, with no
// reads and no conditions. Rows are many, so conflicts are rare.
func (g *Experiment) transactions(u *rows) []named {
	return []named{
		{"2 writes", "operations/s", g.clients(u, false)},
		{"transaction 2 reads + 2 writes", "transactions/s", g.clients(u, true)},
	}
}

// clients runs g.Clients clients for d, each committing one pair of
// writes at a time: in a transaction (tx), or as one plain batch.
func (g *Experiment) clients(u *rows, tx bool) bench.Workload {
	seed := uint64(time.Now().UnixNano()) //nolint:gosec // a clock, positive
	return runClients(g.Clients, func(ctx context.Context, cl int, more func() bool) (int64, error) {
		rng := rand.New(rand.NewPCG(uint64(cl), seed)) //nolint:gosec // a workload, not a secret
		var n int64
		for more() {
			a, b := u.base+rng.Int64N(int64(u.n)), u.base+rng.Int64N(int64(u.n))
			if a == b {
				continue
			}
			var err error
			if tx {
				err = transfer(ctx, u.t, a, b)
			} else {
				_, err = u.t.Client.Apply(ctx, client.Batch{Op: client.Update, Records: []proto.Message{
					&anypb.Any{TypeUrl: rowURL, Value: appendRow(nil, a, 3)},
					&anypb.Any{TypeUrl: rowURL, Value: appendRow(nil, b, 3)},
				}})
			}
			if err != nil {
				return 0, err
			}
			n++
		}
		return n, nil
	})
}

// transfer reads rows a and b in a transaction and writes both back
// changed: the shape of a transfer between two accounts.
func transfer(ctx context.Context, t *bench.Target, a, b int64) error {
	return t.Client.Transact(ctx, func(tx *client.Tx) error {
		recs, err := tx.Get("protobase_lab.concurrency.Row", a, b)
		if err != nil {
			return err
		}
		if len(recs) != 2 {
			return fmt.Errorf("rows %d and %d: %d found", a, b, len(recs))
		}
		return tx.Update(
			&anypb.Any{TypeUrl: rowURL, Value: appendRow(nil, a, 4)},
			&anypb.Any{TypeUrl: rowURL, Value: appendRow(nil, b, 4)})
	}, client.TxOptions{})
}
