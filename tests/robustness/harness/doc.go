// Package harness is what the robustness tests (tests/robustness) share
// beside the server and client of server/servertest: the storage backends
// they run against, the index checker, the seeds of the randomised tests,
// a watcher that lives across server restarts, and a workload of counters
// written by conditional updates and patches with its check (Counters).
package harness

import (
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/serverhook"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

// Insert is the operation most tests write with.
const Insert = pb.WriteOp_WRITE_OP_INSERT

// WithMemFS returns cfg with its data directory on fs, in memory: a test
// cuts the power on fs (pebble.MemFS.PowerCut) and starts the next server
// on what survived.
func WithMemFS(cfg server.Config, fs *pebble.MemFS) server.Config {
	return serverhook.WithMemFS(cfg, fs).(server.Config)
}
