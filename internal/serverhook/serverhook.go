// Package serverhook lets tests outside package server reach what the
// server's API keeps from applications: the robustness tests
// (tests/robustness) flush a running server's memtables so that parallel
// scans have storage files to split, and run a server on a data directory
// in memory whose power they cut. Package server fills the hooks in when
// it is initialised; being internal, they are out of reach of any program
// outside this module.
//
// The hooks take and return the server's types as any: this package
// cannot name them, as server imports it. tests/robustness/harness wraps
// them in typed functions.
package serverhook

import "github.com/protobase/protobase/internal/store/pebble"

var (
	// Flush writes the memtables of srv, a *server.Server, to storage
	// files.
	Flush func(srv any) error
	// WithMemFS returns cfg, a server.Config, with its data directory on
	// fs, in memory.
	WithMemFS func(cfg any, fs *pebble.MemFS) any
)
