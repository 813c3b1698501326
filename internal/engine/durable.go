package engine

import (
	"context"
	"time"
)

// A record's version is the commit sequence of the batch that wrote it
// (on Pebble), and a batch is visible before its fsync: group commit lets
// the next batches in meanwhile. A version read before its batch is
// durable could, after a crash lost the batch, be given again to another
// write, and a condition on it would then pass against other content (a
// lost update). So a read returns a version only once it is durable:
// awaitDurable waits for the batch's writer to make it so, and after
// durableWait makes every applied batch durable itself, as a Watch does
// for a batch whose writer went quiet. Reads without versions do not wait.

// durableWait is how long a read waits for the writer's own sync before it
// syncs.
const durableWait = 20 * time.Millisecond

// awaitDurable returns once version v is durable. On a shared store
// (etcd) a version is a revision, durable once visible; on a store that
// does not sync its writes nothing is, and nothing is waited for.
func (e *Engine) awaitDurable(ctx context.Context, v uint64) error {
	d := e.clog.Durable()
	if v <= d.Value() || e.st.Shared() || !e.st.SyncWrites() {
		return nil
	}
	t := time.NewTimer(durableWait)
	defer t.Stop()
	for {
		n, moved := d.Load()
		if n >= v {
			return nil
		}
		select {
		case <-moved:
		case <-t.C:
			return e.clog.Sync()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
