package server

import (
	"context"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
)

// Flush and Compact reach the storage of a running server from the tests
// (this file is compiled only into them): the bounds test takes large
// batches out of memory before it measures the heap, and the read
// benchmarks need the bulk load compacted into one sorted run, as after a
// quiet period. Neither is a feature of the public API. (The tests outside
// this package reach Flush through internal/serverhook.)

// Flush writes s's memtables to storage files.
func Flush(s *Server) error { return s.eng.Flush() }

// Compact compacts s's whole store.
func Compact(ctx context.Context, s *Server) error { return s.eng.Compact(ctx) }

// WithMemFS returns c with its data directory on fs, in memory: the
// disk-full tests fill fs and free it again. Config keeps the field
// unexported so that no application meets it.
func WithMemFS(c Config, fs *pebble.MemFS) Config {
	c.memFS = fs
	return c
}

// CheckMemFS is Check of the data directory dataDir on fs.
func CheckMemFS(ctx context.Context, fs *pebble.MemFS, dataDir string) (*CheckReport, error) {
	return check(ctx, pebble.Options{Dir: dataDir, Layout: keyspace.Layout{}, FS: fs, ReadOnly: true})
}

// SetDropChunk makes DropEtcd delete n keys per transaction until the
// returned function restores the default.
func SetDropChunk(n int) (restore func()) {
	old := dropChunk
	dropChunk = n
	return func() { dropChunk = old }
}

// EmbeddedNATS is the embedded NATS server of s (nil without one): the
// tests close the service's own connection on it, as NATS does with a slow
// consumer.
func EmbeddedNATS(s *Server) *natsserver.Server { return s.tr.ns }
